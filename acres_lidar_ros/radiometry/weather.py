"""Rain and fog: extinction, backscatter and clutter slabs (spec "Rain and Fog").

``atmosphere`` turns a rain rate and a visibility into the extinction ``alpha`` of the range
equation and the backscatter coefficients of the clutter. ``clutter_slabs`` cuts the beams into
slabs and ``slab_drop_energy`` draws the rain drops of each slab from the rain stream
(PCG32, state seed + 4036, sequence 5).

Drawing order of the rain stream, per scan: the slabs are listed beam by beam in ring-major
sequence (beam index ``r * N_c + c``) and in range order within a beam. First one 32-bit
number per slab gives its drop count ``N`` (Poisson inversion); then one number per drop gives
``E_i``, all drops of the first slab first. Without rain (``R_r = 0``) nothing is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.config.sensors import WeatherConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.equations import fog_extinction, fog_visibility_m, rain_extinction
from acres_lidar_ros.radiometry.noise import Pcg32

MAX_RAIN_MM_PER_H = 500.0
MIN_VISIBILITY_M = 10.0
MAX_DROPS_PER_SLAB = 64
# Above this mean, P(N < 64) is below 1e-15, far under the 2^-32 step of the uniforms, so the
# inversion would give 64 anyway; the count is set without summing the series (exp(-mean)
# underflows past ~745).
_POISSON_SATURATED_MEAN = 150.0


def haze_blend(fog_visibility_m_: np.ndarray | float) -> np.ndarray:
    """``h = clamp((V_f - 0.5) / 0.5, 0, 1)`` with ``V_f`` in km: 0 is fog, 1 is haze."""
    v_km = np.asarray(fog_visibility_m_, dtype=np.float64) / 1000.0
    return np.clip((v_km - 0.5) / 0.5, 0.0, 1.0)


def fog_backscatter(
    alpha_fog_per_m: np.ndarray | float,
    fog_visibility_m_: np.ndarray | float,
    fog_lidar_ratio_sr: float,
    haze_lidar_ratio_sr: float,
) -> np.ndarray:
    """``beta_fog = alpha_fog ((1 - h) / S_fog + h / S_haze)``, 1/(m sr)."""
    h = haze_blend(fog_visibility_m_)
    return np.asarray(alpha_fog_per_m, dtype=np.float64) * ((1.0 - h) / fog_lidar_ratio_sr + h / haze_lidar_ratio_sr)


def rain_backscatter(alpha_rain_per_m: np.ndarray | float, rain_lidar_ratio_sr: float) -> np.ndarray:
    """``beta_rain = alpha_rain / S_rain``, 1/(m sr)."""
    return np.asarray(alpha_rain_per_m, dtype=np.float64) / rain_lidar_ratio_sr


def drop_density_per_m3(
    rain_mm_per_h: np.ndarray | float,
    drops_per_m3: float = LIDAR_PARAM["weather.rain_drops_per_m3"].default,
    exponent: float = LIDAR_PARAM["weather.rain_drops_exponent"].default,
) -> np.ndarray:
    """Marshall-Palmer drop density ``n_d = 1951 R_r^0.21``, 1/m^3 (0 without rain)."""
    rate = np.maximum(np.asarray(rain_mm_per_h, dtype=np.float64), 0.0)
    return np.where(rate > 0.0, drops_per_m3 * rate**exponent, 0.0)


def mean_drops_in_slab(
    drop_density_per_m3_: float,
    exit_diameter_m: float,
    center_range_m: np.ndarray | float,
    divergence_rad: float,
    slab_length_m: float,
) -> np.ndarray:
    """``Lambda = n_d pi (d_exit / 2 + R_c beta / 2)^2 Delta R``: mean drop count of a slab.

    Parameters
    ----------
    drop_density_per_m3_ : float
        ``n_d``, 1/m^3.
    exit_diameter_m : float
        ``d_exit``, m.
    center_range_m : (n,) float64
        ``R_c``, m.
    divergence_rad : float
        ``beta``, full angle, rad.
    slab_length_m : float
        ``Delta R``, m.

    Returns
    -------
    (n,) float64.
    """
    radius_m = 0.5 * exit_diameter_m + 0.5 * np.asarray(center_range_m, dtype=np.float64) * divergence_rad
    return drop_density_per_m3_ * np.pi * radius_m * radius_m * slab_length_m


def poisson_from_uniform(u: np.ndarray, mean: np.ndarray, cap: int = MAX_DROPS_PER_SLAB) -> np.ndarray:
    """Poisson numbers by inversion, limited to ``cap``: the smallest ``N`` with ``u <= CDF(N)``.

    ``CDF`` is summed term by term, ``P(0) = exp(-Lambda)``, ``P(k) = P(k - 1) Lambda / k``.

    Parameters
    ----------
    u : (n,) float64
        Uniform numbers in (0, 1).
    mean : (n,) float64
        ``Lambda`` >= 0. ``Lambda = 0`` gives 0; ``Lambda >= 150`` gives ``cap`` directly
        (the inversion would too: ``P(N < 64)`` is far below the resolution of ``u``).
    cap : int

    Returns
    -------
    (n,) int64 in [0, cap].
    """
    levels, level = np.unique(np.asarray(mean, dtype=np.float64).reshape(-1), return_inverse=True)
    return poisson_of_levels(u, level, levels, cap)


def poisson_of_levels(
    u: np.ndarray, level: np.ndarray, level_mean: np.ndarray, cap: int = MAX_DROPS_PER_SLAB
) -> np.ndarray:
    """``poisson_from_uniform(u, level_mean[level])``, with the CDF of each of the few means
    summed once (the clutter slabs' means depend only on the slab number).

    Parameters
    ----------
    u : (n,) float64
    level : (n,) int64
        Index into ``level_mean`` of each number's mean.
    level_mean : (L,) float64
    cap : int
    """
    level_mean = np.ascontiguousarray(level_mean, dtype=np.float64).reshape(-1)
    cdf = poisson_cdfs(level_mean, cap)
    return _invert_cdfs(
        np.ascontiguousarray(u, dtype=np.float64).reshape(-1), np.ascontiguousarray(level).reshape(-1), cdf, level_mean
    )


@numba.njit(cache=True, nogil=True)
def _poisson_cdfs(mean, first_term, cap):
    """CDF(0 .. cap) of each mean, summed term by term (row ``l`` for ``mean[l]``)."""
    cdf = np.zeros((mean.shape[0], cap + 1))
    for m in range(mean.shape[0]):
        lam = mean[m]
        term = first_term[m]
        cdf[m, 0] = term
        for k in range(1, cap + 1):
            term = term * lam / k
            cdf[m, k] = cdf[m, k - 1] + term
    return cdf


@numba.njit(cache=True, nogil=True)
def invert_cdf(u: float, cdf: np.ndarray, mean: float) -> int:
    """The Poisson count of one uniform ``u``: the smallest ``N <= cap`` with ``u <= CDF(N)``
    (``cdf`` of ``mean`` from ``_poisson_cdfs``; ``cap = len(cdf) - 1``)."""
    cap = cdf.shape[0] - 1
    if mean >= _POISSON_SATURATED_MEAN:
        return cap
    if not mean > 0.0:
        return 0
    # The CDF does not fall, so that N is the count of CDF values below u: counted without
    # branches over the first 8, then one by one.
    k = 0
    for j in range(min(8, cap)):
        k += u > cdf[j]
    if k == 8:
        while k < cap and u > cdf[k]:
            k += 1
    return k


@numba.njit(cache=True, nogil=True)
def _invert_cdfs(u, level, cdf, mean):
    count = np.zeros(u.shape[0], np.int64)
    for i in range(u.shape[0]):
        count[i] = invert_cdf(u[i], cdf[level[i]], mean[level[i]])
    return count


def poisson_cdfs(level_mean: np.ndarray, cap: int = MAX_DROPS_PER_SLAB) -> np.ndarray:
    """(L, cap + 1) float64: ``CDF(0 .. cap)`` of each mean, as ``poisson_from_uniform`` sums it."""
    level_mean = np.ascontiguousarray(level_mean, dtype=np.float64).reshape(-1)
    with np.errstate(over="ignore"):
        first = np.exp(-level_mean)
    return _poisson_cdfs(level_mean, first, int(cap))


@numba.njit(cache=True, nogil=True)
def _half_square_sums(counts, energy):
    """``sum E_i^2 / 2`` of each slab's run of ``counts[s]`` drops, in order."""
    out = np.zeros(counts.shape[0])
    at = 0
    for s in range(counts.shape[0]):
        total = 0.0
        for _ in range(counts[s]):
            e = energy[at]
            total += 0.5 * e * e
            at += 1
        out[s] = total
    return out


def exponential_from_uniform(u: np.ndarray) -> np.ndarray:
    """Exponential numbers with the mean 1: ``E = -ln U``; (n,) -> (n,) float64."""
    return -np.log(np.asarray(u, dtype=np.float64))


def slab_drop_energy(stream: Pcg32, mean_drops: np.ndarray) -> np.ndarray:
    """``sum_{i=1}^{N} E_i^2 / 2`` of each slab, drawn from the rain stream.

    One number per slab for ``N`` (Poisson with the mean ``Lambda``, at most 64), then one
    number per drop for ``E_i`` (exponential, mean 1), in slab order. Nothing is drawn when
    there are no slabs or every ``Lambda`` is 0.

    Parameters
    ----------
    stream : Pcg32
        The rain stream; it advances.
    mean_drops : (n,) float64
        ``Lambda`` of each slab, in drawing order.

    Returns
    -------
    (n,) float64.
    """
    mean_drops = np.asarray(mean_drops, dtype=np.float64)
    n = mean_drops.size
    if n == 0 or not np.any(mean_drops > 0.0):
        return np.zeros(n)
    counts = poisson_from_uniform(stream.next_uniform_array(n), mean_drops)
    total = int(counts.sum())
    energy = exponential_from_uniform(stream.next_uniform_array(total))
    return _half_square_sums(counts, energy)


def slab_reflectance(
    beta_fog_per_m_sr: float,
    beta_rain_per_m_sr: float,
    slab_length_m: float,
    mean_drops: np.ndarray | float,
    drop_energy: np.ndarray | float,
) -> np.ndarray:
    """``rho_slab = pi beta_fog Delta R + pi beta_rain Delta R (1 / Lambda) sum E_i^2 / 2``.

    The rain term is 0 where ``Lambda = 0``. Shapes: (n,) float64 in, (n,) float64 out.
    """
    mean, energy = np.broadcast_arrays(
        np.asarray(mean_drops, dtype=np.float64), np.asarray(drop_energy, dtype=np.float64)
    )
    fog_term = np.pi * beta_fog_per_m_sr * slab_length_m
    rain_factor = np.pi * beta_rain_per_m_sr * slab_length_m
    out = _slab_reflectances(
        fog_term, rain_factor, np.ascontiguousarray(mean).reshape(-1), np.ascontiguousarray(energy).reshape(-1)
    )
    return out.reshape(mean.shape)


@numba.njit(cache=True, nogil=True)
def slab_reflectance_of(fog_term: float, rain_factor: float, mean_drops: float, drop_energy: float) -> float:
    """``rho_slab`` of one slab from ``fog_term = pi beta_fog Delta R`` and ``rain_factor =
    pi beta_rain Delta R`` (the equation of ``slab_reflectance``)."""
    rain_term = drop_energy / mean_drops if mean_drops > 0.0 else 0.0
    return fog_term + rain_factor * rain_term


@numba.njit(cache=True, nogil=True)
def _slab_reflectances(fog_term, rain_factor, mean_drops, drop_energy):
    out = np.empty(mean_drops.shape[0])
    for i in range(out.shape[0]):
        out[i] = slab_reflectance_of(fog_term, rain_factor, mean_drops[i], drop_energy[i])
    return out


def slab_is_skipped(signal: np.ndarray | float, ambient_counts: float, threshold_counts: float) -> np.ndarray:
    """The skip rule: a slab is ignored when ``S + 5 sqrt(S + B) < S_T``; (n,) -> (n,) bool."""
    s = np.asarray(signal, dtype=np.float64)
    out = _slabs_skipped(np.ascontiguousarray(s).reshape(-1), float(ambient_counts), float(threshold_counts))
    return out.reshape(s.shape)


@numba.njit(cache=True, nogil=True)
def slab_skipped(signal: float, ambient_counts: float, threshold_counts: float) -> bool:
    """The skip rule of one slab (the equation of ``slab_is_skipped``)."""
    return signal + 5.0 * np.sqrt(max(signal + ambient_counts, 0.0)) < threshold_counts


@numba.njit(cache=True, nogil=True)
def _slabs_skipped(signal, ambient_counts, threshold_counts):
    out = np.empty(signal.shape[0], np.bool_)
    for i in range(out.shape[0]):
        out[i] = slab_skipped(signal[i], ambient_counts, threshold_counts)
    return out


def clutter_slabs(stop_range_m: np.ndarray, min_range_m: float, slab_length_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Whole slabs of the length ``Delta R`` from ``R_min`` up to each beam's stop range.

    Slab ``k`` of a beam spans ``[R_min + k Delta R, R_min + (k + 1) Delta R]`` and exists when
    its far end is at or before the stop range (the smallest of ``clutter_max_range_m``, the
    maximum range and the nearest solid hit), so no slab reaches into a surface.

    Parameters
    ----------
    stop_range_m : (n,) float64
        Stop range of each beam, m (inf is allowed only if the caller limits it first).
    min_range_m : float
        ``R_min``, m.
    slab_length_m : float
        ``Delta R``, m; 0 gives no slabs.

    Returns
    -------
    beam : (m,) int64
        Index of each slab's beam into ``stop_range_m``; beams in input order, slabs in range order.
    center_range_m : (m,) float64
        ``R_c``, m.
    """
    beam, k = clutter_slab_numbers(stop_range_m, min_range_m, slab_length_m)
    return beam, slab_center_m(k, min_range_m, slab_length_m)


def clutter_slab_numbers(
    stop_range_m: np.ndarray, min_range_m: float, slab_length_m: float
) -> tuple[np.ndarray, np.ndarray]:
    """The slabs of ``clutter_slabs`` as (beam, slab number ``k``), two (m,) int64 arrays."""
    return _enumerate_slabs(slabs_per_beam(stop_range_m, min_range_m, slab_length_m))


def slabs_per_beam(stop_range_m: np.ndarray, min_range_m: float, slab_length_m: float) -> np.ndarray:
    """(n,) int64: how many slabs ``clutter_slabs`` gives each beam."""
    stop = np.ascontiguousarray(stop_range_m, dtype=np.float64).reshape(-1)
    if slab_length_m <= 0.0 or stop.size == 0:
        return np.zeros(stop.size, np.int64)
    span = np.where(np.isfinite(stop), stop - min_range_m, 0.0)
    # A tiny tolerance keeps a slab whose far end equals the stop range up to rounding.
    return np.maximum(np.floor(span / slab_length_m + 1e-9), 0.0).astype(np.int64)


def slab_center_m(k: np.ndarray, min_range_m: float, slab_length_m: float) -> np.ndarray:
    """``R_c = R_min + (k + 1/2) Delta R`` of slab number ``k``, m."""
    return min_range_m + (np.asarray(k) + 0.5) * slab_length_m


@numba.njit(cache=True, nogil=True)
def _enumerate_slabs(per_beam):
    total = 0
    for b in range(per_beam.shape[0]):
        total += per_beam[b]
    beam = np.empty(total, np.int64)
    k = np.empty(total, np.int64)
    at = 0
    for b in range(per_beam.shape[0]):
        for j in range(per_beam[b]):
            beam[at] = b
            k[at] = j
            at += 1
    return beam, k


@dataclass(frozen=True)
class Atmosphere:
    """Rain and fog of one scan.

    Attributes
    ----------
    rain_mm_per_h, visibility_m : float
        The conditions (``inf`` visibility is clear air).
    alpha_rain_per_m, alpha_fog_per_m : float
        Extinction of rain and of fog and haze at the sensor wavelength, 1/m.
    fog_visibility_m : float
        ``V_f``, the visibility without the rain part, m.
    beta_rain_per_m_sr, beta_fog_per_m_sr : float
        Backscatter coefficients, 1/(m sr).
    drop_density_per_m3 : float
        ``n_d``, 1/m^3.
    """

    rain_mm_per_h: float = 0.0
    visibility_m: float = math.inf
    alpha_rain_per_m: float = 0.0
    alpha_fog_per_m: float = 0.0
    fog_visibility_m: float = math.inf
    beta_rain_per_m_sr: float = 0.0
    beta_fog_per_m_sr: float = 0.0
    drop_density_per_m3: float = 0.0

    @property
    def alpha_per_m(self) -> float:
        """Total extinction ``alpha = alpha_rain + alpha_fog``, 1/m."""
        return self.alpha_rain_per_m + self.alpha_fog_per_m

    @property
    def has_clutter(self) -> bool:
        """True when droplets send light back (some backscatter is above 0)."""
        return self.beta_rain_per_m_sr > 0.0 or self.beta_fog_per_m_sr > 0.0


CLEAR_AIR = Atmosphere()


def check_conditions(rain_mm_per_h: float, visibility_m: float) -> None:
    """Reject a rain rate outside [0, 500] mm/h or a visibility below 10 m (or NaN).

    Raises
    ------
    ConfigError
        Naming the option (``rain_mm_per_h`` / ``visibility_m``), the value and the range.
    """
    rain = float(rain_mm_per_h)
    if not (0.0 <= rain <= MAX_RAIN_MM_PER_H):
        raise ConfigError(f"rain_mm_per_h = {rain_mm_per_h!r}: must be between 0 and {MAX_RAIN_MM_PER_H:g} mm/h")
    vis = float(visibility_m)
    if math.isnan(vis) or vis < MIN_VISIBILITY_M:
        raise ConfigError(
            f"visibility_m = {visibility_m!r}: must be at least {MIN_VISIBILITY_M:g} m (inf for clear air)"
        )


def atmosphere(rain_mm_per_h: float, visibility_m: float, wavelength_nm: float, weather: WeatherConfig) -> Atmosphere:
    """The extinction and backscatter of a scan's rain and fog (AcresLidar::Atmosphere).

    ``alpha_rain`` by the power law, ``alpha_fog`` by Koschmieder without the rain part and the
    Kim-McArthur-Korevaar ``q`` at ``wavelength_nm``, with the coefficients of the sensor's
    ``weather`` block (``SensorConfig.weather``, validated by the schema); ``beta_rain = alpha_rain / S_rain``,
    ``beta_fog = alpha_fog ((1 - h) / S_fog + h / S_haze)``. With ``weather.enabled`` false the
    result is clear air (after the inputs are checked).

    Raises
    ------
    ConfigError
        For a rain rate outside [0, 500] mm/h or a visibility below 10 m.
    """
    check_conditions(rain_mm_per_h, visibility_m)
    if not weather.enabled:
        return CLEAR_AIR
    rain = float(rain_mm_per_h)
    vis = float(visibility_m)
    alpha_rain = float(rain_extinction(rain, weather.rain_extinction_db_per_km, weather.rain_extinction_exponent))
    alpha_fog = float(fog_extinction(vis, rain, wavelength_nm))
    v_f = float(fog_visibility_m(vis, rain)[1])
    return Atmosphere(
        rain_mm_per_h=rain,
        visibility_m=vis,
        alpha_rain_per_m=alpha_rain,
        alpha_fog_per_m=alpha_fog,
        fog_visibility_m=v_f,
        beta_rain_per_m_sr=float(rain_backscatter(alpha_rain, weather.rain_lidar_ratio_sr)),
        beta_fog_per_m_sr=float(
            fog_backscatter(alpha_fog, v_f, weather.fog_lidar_ratio_sr, weather.haze_lidar_ratio_sr)
        ),
        drop_density_per_m3=float(drop_density_per_m3(rain, weather.rain_drops_per_m3, weather.rain_drops_exponent)),
    )

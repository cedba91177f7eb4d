"""The spec's radiometric model: equations, noise streams, weather and returns."""

"""The progress line of long command steps: rewritten on a terminal, plain lines in a log; an injected clock."""

from __future__ import annotations

import io

from acres_lidar_ros.apps.progress_line import ProgressLine, progress_text


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_progress_text_has_the_count_bar_and_share_or_the_count_alone():
    assert progress_text("render after", 5, 20) == "render after: 5 / 20 [######..................]  25 %"
    assert progress_text("read", 7, 0) == "read: 7"
    assert progress_text("x", 30, 20).endswith("[########################] 100 %")


def test_on_a_terminal_the_line_rewrites_itself_at_most_every_interval_and_ends_each_step():
    out, clock = Terminal(), Clock()
    line = ProgressLine(out, clock, tty_interval_s=0.5)
    line.update("read", 1)
    clock.now_s = 0.2
    line.update("read", 2)  # within 0.5 s of the last: not drawn
    clock.now_s = 0.6
    line.update("read", 12)
    line.update("render", 1, 2)  # a new step: drawn at once, on a new line
    line.update("render", 2, 2)  # its end: drawn at once
    line.close()
    assert out.getvalue() == (
        "\rread: 1\rread: 12\n\r" + progress_text("render", 1, 2) + "\r" + progress_text("render", 2, 2) + "\n"
    )


def test_in_a_log_plain_lines_at_each_step_its_end_and_every_interval():
    out, clock = io.StringIO(), Clock()
    line = ProgressLine(out, clock, log_interval_s=10.0)
    for k in range(1, 21):
        clock.now_s = float(k)
        line.update("render before", k, 20)
    line.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines == [progress_text("render before", k, 20) for k in (1, 11, 20)]

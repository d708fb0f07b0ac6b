"""The progress bar of long runs, on stderr (``mend check``, ``mend fix``)."""

from __future__ import annotations


class Progress:
    """A progress bar on stderr, shown only for runs longer than about half a second."""

    def __init__(self, label: str) -> None:
        import time

        self.label = label
        self._time = time.perf_counter
        self.start = self._time()
        self.count = 0
        self.bar = None

    def tick(self) -> None:
        self.count += 1
        if self.bar is None and self._time() - self.start > 0.5:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task("files", total=None)
            self.bar.start()
        if self.bar is not None:
            self.bar.update(self.task, completed=self.count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


__all__ = ["Progress"]

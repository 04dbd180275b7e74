"""The `attncli` command and `python -m attncli`: Ctrl-C is one line and status 130 from the very first moment."""

import gc
import signal
import sys
from types import FrameType


def _interrupted(signum: int, frame: FrameType | None) -> None:
    """SIGINT at any moment, start-up included: one line, status 130, no traceback."""
    if sys.stderr is not None:
        try:
            sys.stderr.write("attncli: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    raise SystemExit(130)  # unwinds through every `finally`, so a temporary file is still removed


def main() -> None:
    """Catch Ctrl-C first, then import the command line (Typer, Rich: the slow part of start-up) and run it."""
    # One command is one short process whose objects reference counting frees. Python's cycle collector,
    # run every 700 new objects by default, took 67 passes and about a tenth of the CPU time of importing
    # numpy, yaml, typer and Rich (docs/performance.md, row 2); every 100,000 it still runs, in long commands.
    gc.set_threshold(100_000, 50, 100)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when started with SIGINT ignored (`nohup`, `&`)
        signal.signal(signal.SIGINT, _interrupted)
    from attncli.cli.app import main as run

    try:
        run()
    finally:
        # Then Python's exit: before freeing the modules it runs the cycle collector over every object still alive, the
        # libraries' included (numpy's, Typer's, Rich's): some 20 ms of CPU time after `run cat` had printed, more than
        # attncli's own start-up (docs/performance.md, row 2). Frozen, those objects are left to reference counting, which
        # frees the modules as before; only a cycle still alive at exit is not collected, and the OS takes its memory back.
        gc.freeze()


if __name__ == "__main__":
    main()

"""The message observer: every line printed, every record handed to handlers and every warning, in order;
the comparison of a repaired run's messages with the original's (kept, lost, added, reordered)."""

from __future__ import annotations

import logging
import sys
import warnings

from benchmarks.zoo.observe import Observer, compare


def test_prints_logs_and_warnings_are_seen_in_the_order_they_happen():
    quiet = logging.getLogger("tests.observe.quiet")
    quiet.propagate = False  # a library logger with its own handler (transformers' is so)
    quiet.addHandler(logging.NullHandler())
    loud = logging.getLogger("tests.observe.loud")
    with Observer() as obs:
        print("first", end="")
        print(" line")
        quiet.warning("inner saw %d rows", 3)
        warnings.warn("careful", UserWarning)
        warnings.warn("careful", UserWarning)  # the filter is "always" inside: seen twice
        loud.info("below the level: not handed to any handler")
        print("to stderr", file=sys.stderr)
        print("unterminated", end="")
    assert obs.messages == [
        ["stdout", "", "", "first line"],
        ["log", "tests.observe.quiet", "WARNING", "inner saw 3 rows"],
        ["warning", "UserWarning", "", "careful"],
        ["warning", "UserWarning", "", "careful"],
        ["stderr", "", "", "to stderr"],
        ["stdout", "", "", "unterminated"],
    ]


def test_torch_and_compiler_loggers_are_left_out_and_streams_are_restored():
    out, err, call = sys.stdout, sys.stderr, logging.Logger.callHandlers
    with Observer() as obs:
        logging.getLogger("torch._dynamo.convert_frame").warning("graph break")
        logging.getLogger("torch.__trace").warning("")
    assert obs.messages == []
    assert (sys.stdout, sys.stderr, logging.Logger.callHandlers) == (out, err, call)


def test_lines_of_torchs_own_log_handler_on_the_stream_are_left_out():
    # torch's handler is made at the first compile on the sys.stderr of that moment: the observer's stream
    with Observer() as obs:
        print("W1129 02:36:19.661000 13456 .venv/lib/python3.11/site-packages/torch/_dynamo/variables/tensor.py:1841]"
              " [0/0] Graph break from `Tensor.item()`, consider setting:", file=sys.stderr)
        print("W1129 02:36:19.661000 13456 torch/_dynamo/variables/tensor.py:1841] [0/0]     or:", file=sys.stderr)
        print("W1129 02:36:19.661000 13456 mylib/train.py:12] the user's own glog-style line", file=sys.stderr)
    assert obs.messages == [["stderr", "", "", "W1129 02:36:19.661000 13456 mylib/train.py:12] the user's own "
                                               "glog-style line"]]


def test_text_is_normalised_for_the_copy_folder_and_addresses():
    with Observer(["/cache/safe-1234/transformers"]) as obs:
        print("loaded /cache/safe-1234/transformers/models/x.py at 0x7f3a9c0d10")
    assert obs.messages == [["stdout", "", "", "loaded <root>/models/x.py at 0x?"]]


def _m(*texts):
    return [["log", "m", "WARNING", t] for t in texts]


def test_compare_counts_kept_lost_added_and_reordered():
    same = compare(_m("a", "b", "c"), _m("a", "b", "c"))
    assert (same.kept, same.lost, same.added, same.reordered, same.ok) == (3, 0, 0, 0, True)
    lost = compare(_m("a", "b", "c"), _m("a", "c"))
    assert (lost.kept, lost.lost, lost.added, lost.ok) == (2, 1, 0, False) and "lost" in lost.first[0]
    added = compare(_m("a"), _m("a", "a"))  # a message emitted twice where the original emitted it once
    assert (added.kept, added.lost, added.added) == (1, 0, 1)
    moved = compare(_m("a", "b", "c"), _m("b", "c", "a"))  # a message deferred past the others
    assert (moved.kept, moved.lost, moved.added, moved.reordered) == (2, 0, 0, 1) and not moved.ok


def test_a_traceback_in_a_message_is_cut_the_message_kept():
    """Autograd's anomaly warning carries the forward's frames (Dynamo's resume functions, lines a repair moves):
    the same warning from an original and a repaired copy compares equal; a different warning does not."""
    def seen(text: str) -> list:
        with Observer(["/copy"]) as obs:
            warnings.warn(text, UserWarning)
        return obs.messages

    def anomaly(line: int, fn: str) -> str:
        return (f'Error detected in IndexPutBackward0. Traceback of forward call that caused the error:\n  File '
                f'"/copy/models/m.py", line {line}, in {fn}\n    x[mask] = 0\n')

    a = seen(anomaly(1106, "torch_dynamo_resume_in_forward_at_966"))
    b = seen(anomaly(1123, "forward"))
    assert a == b == [["warning", "UserWarning", "", "Error detected in IndexPutBackward0."]]
    assert compare(a, b).ok
    assert not compare(a, seen("Error detected in MulBackward0.")).ok

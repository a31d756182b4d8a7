"""The retry and overflow patterns look at a bounded part of an error text (its head and its tail), so a huge
provider error page cannot hold the event loop in regexes (a 50 MB body once took 51 s)."""

from __future__ import annotations

from pisces.ai.error_kinds import (
    CLASSIFY_HEAD_CHARS,
    CLASSIFY_TAIL_CHARS,
    is_overflow_error,
    is_retryable_error,
    retry_after_ms,
)

FILLER = "x" * (20 * 1024 * 1024)


def test_only_the_head_and_the_tail_are_classified():
    middle = f"400 {FILLER} the server is overloaded {FILLER}"
    assert not is_retryable_error(middle), "a word 20 MB deep must not be looked at"
    assert not is_overflow_error(f"400 {FILLER} prompt is too long {FILLER}")


def test_what_matters_is_still_found_at_either_end():
    assert is_retryable_error(f"529 overloaded_error: {FILLER}")
    assert is_overflow_error(f"400 prompt is too long: {FILLER}")
    assert retry_after_ms(f"429 {FILLER} (retry-after: 7s)") == 7000
    assert is_retryable_error(f"{FILLER} connection lost")


def test_short_texts_are_classified_whole():
    text = "a" * (CLASSIFY_HEAD_CHARS + CLASSIFY_TAIL_CHARS - 20) + " rate limit"
    assert is_retryable_error(text)

"""Hypothesis strategies shared by the record codec property tests."""

from __future__ import annotations

from hypothesis import strategies as st

# Values past 8 KiB cross the codecs' varint and buffer boundaries. They are built by
# repeating a short random seed, so each example draws little entropy: drawing 8 KiB of
# random bytes per value trips hypothesis's data_too_large health check at random.
large_bytes = st.builds(lambda seed, n: (seed * (n // len(seed) + 1))[:n],
                        st.binary(min_size=1, max_size=16), st.integers(8190, 8300))

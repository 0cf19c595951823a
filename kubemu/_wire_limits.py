"""Limits and socket tunables that both ends of the wire share (see `kubemu.wire`)."""

DEFAULT_MAX_FRAME = 2 * 1024 * 1024
MAXMSGSIZE_FACTOR = 4
HWM = 100_000
CLIENT_LINGER_MS = 200

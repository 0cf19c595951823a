"""A row or peer that cannot run on this machine: the suite prints why and carries on."""


class Skip(Exception):
    """The message is the reason, printed in the row's place."""

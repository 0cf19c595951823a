"""kubemu: the command line and what every layer shares (the wire, sd_notify, the state directory)."""

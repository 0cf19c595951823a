"""The cluster DNS (CoreDNS's role): `python -m components.dns`."""

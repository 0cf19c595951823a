"""init: layer 1, the systemd analog. `python -m init --node-dir DIR` supervises the units in DIR/units."""

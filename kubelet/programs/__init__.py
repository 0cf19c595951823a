"""Small programs the image catalog (kubelet/images.py) runs in place of images' entrypoints.

Each is a stand-alone script (standard library only), run as `{python} {programs}/NAME.py`."""

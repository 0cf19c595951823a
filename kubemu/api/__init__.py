"""The Kubernetes API objects kubemu understands: defaulting, validation, quantities.

Pure code shared by the kubelet (static pods) and the apiserver: no processes, no sockets.
"""

"""kubelet: layer 2, the node agent."""

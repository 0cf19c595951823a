"""kube-proxy: turns Services and EndpointSlices into kernel rules (nftables, in the cluster's
fabric namespace) or, without the privileges or `nft`, into userspace forwarders."""

"""annexctl: the command line to peer clusters, offload namespaces and see what annex does."""

"""Pure translation ("forge") functions, one module per kind: what the components write, computed
from what they read. No I/O here; the home agent and the remote enforcer do the fetching and
writing around these functions."""

"""Resource reflection: the I/O side, one module per kind as in
`shared/forge/`; the generic machinery is in `reflector`."""

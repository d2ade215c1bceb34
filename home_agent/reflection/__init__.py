"""Resource reflection (DESIGN.md section 5): the I/O side, one module per kind as in
`shared/forge/`; the generic machinery is in `reflector`."""

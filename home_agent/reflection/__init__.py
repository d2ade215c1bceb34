"""Resource reflection: the I/O side, one module per kind as in `shared/forge/`.

- reflector.py            the generic reflector of one kind, and what a kind's rules tell it
- kinds.py                the reflected kinds: a literal list of their rules
- <kind>.py               one kind's rules (and its reflector, when it decides more)
- event.py, token.py      the companions: remote Events home, the pods' service-account tokens
- event_copies.py         the Event reflector's copies at home, as it knows them
- required.py             the pods' wait for the copies they need to start
- peering.py              what every reflector reads and writes through
- manager.py              the reflection as one piece: started, resynced and stopped together

Nothing here takes the agent apart: `home_agent.assembly` builds each reflector with what it
uses, `home_agent.routes` feeds them."""

"""The reflected kinds, in one place: the agent's `REFLECTED_KINDS` (their flags), in that
order. Each has its module here, named as its flag, whose `<FLAG>_RULES` tell the generic
reflector what is particular to it; `home_agent.assembly` builds their reflectors and the
companions beside them."""

from __future__ import annotations

from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.endpointslice import ENDPOINTSLICE_RULES
from home_agent.reflection.ingress import INGRESS_RULES
from home_agent.reflection.persistentvolumeclaim import PERSISTENTVOLUMECLAIM_RULES
from home_agent.reflection.reflector import KindRules
from home_agent.reflection.secret import SECRET_RULES
from home_agent.reflection.service import SERVICE_RULES

KINDS: list[KindRules] = [CONFIGMAP_RULES, SECRET_RULES, SERVICE_RULES, ENDPOINTSLICE_RULES,
                          INGRESS_RULES, PERSISTENTVOLUMECLAIM_RULES]

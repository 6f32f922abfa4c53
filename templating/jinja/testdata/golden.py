#!/usr/bin/env python3
"""Regenerate golden.json: render every case of cases.json with real Jinja 3,
configured the way the original PaV configured it (image/pav/shared/templating.py:
trim_blocks, lstrip_blocks, a finalize that rejects undefined and non-scalars,
the tobash filter, a module-level `yaml` variable).

    python3 templating/jinja/testdata/golden.py
"""
import json, os, shlex
from jinja2 import Undefined, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

here = os.path.dirname(os.path.abspath(__file__))

def finalize(value):
    if isinstance(value, Undefined):
        raise UndefinedError("Expressions must not evaluate to undefined")
    if not isinstance(value, (str, int, float)):
        raise TypeError("Expressions must evaluate to a string or numeric value")
    return str(value)

def tobash(value):
    if isinstance(value, Undefined):
        raise UndefinedError("Filter 'tobash' may not be applied to undefined")
    if not isinstance(value, (str, int, float)):
        raise TypeError("Filter 'tobash' expects a string or numeric value")
    s = str(value)
    if s:
        return "$'\\n'".join((shlex.quote(p) if p else "") for p in s.split("\n"))
    return "''"

def get_pvc(name, namespace):
    if name == "missing":
        raise LookupError("not found")
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"volumeName": "pv-" + name}}

cases = json.load(open(os.path.join(here, "cases.json")))
out = []
for c in cases:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, finalize=finalize)
    env.filters["tobash"] = tobash
    env.globals.update(c.get("vars", {}))
    env.globals["get_pvc"] = get_pvc
    r = {"name": c["name"], "source": c["source"], "vars": c.get("vars", {})}
    try:
        t = env.from_string(c["source"])
        r["output"] = t.render()
        y = getattr(t.module, "yaml", False)
        if not isinstance(y, bool):
            raise TypeError("yaml must be a bool")
        r["yaml"] = y
    except Exception as e:
        r["error"] = type(e).__name__ + ": " + str(e)
    out.append(r)
json.dump(out, open(os.path.join(here, "golden.json"), "w"), indent=1, ensure_ascii=True)
print(len(out), "cases")

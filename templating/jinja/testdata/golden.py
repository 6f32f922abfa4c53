#!/usr/bin/env python3
"""Real Jinja 3 configured the way the original PaV configured it
(image/pav/shared/templating.py: trim_blocks, lstrip_blocks, an immutable
sandbox, a finalize that rejects undefined and non-scalars, the tobash filter,
a module-level `yaml` variable). The one definition of that environment, for
both of its uses:

    python3 templating/jinja/testdata/golden.py          # regenerate golden.json from cases.json
    python3 templating/jinja/testdata/golden.py --serve  # the differential tester's oracle

With --serve it reads JSON lines {"source": ..., "vars": {...}} on stdin and
writes one JSON line per request: {"output": ..., "yaml": ...} or
{"error": ...}, or {"timeout": true} for a render that ran too long; its first
line is {"jinja": <version>, "python": <version>}.
"""
import json, os, shlex, signal, sys, warnings
import jinja2
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

def render(source, variables):
    """Renders source with variables as PaV's templates are rendered: a dict
    with output and yaml, or error."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, finalize=finalize)
    env.filters["tobash"] = tobash
    env.globals.update(variables)
    env.globals["get_pvc"] = get_pvc
    try:
        t = env.from_string(source)
        out = t.render()
        y = getattr(t.module, "yaml", False)
        if not isinstance(y, bool):
            raise TypeError("yaml must be a bool")
        return {"output": out, "yaml": y}
    except Exception as e:
        return {"error": type(e).__name__ + ": " + str(e)}

class Timeout(BaseException):
    """Not an Exception: no template construct catches it."""

def serve(timeout_seconds=10):
    def expired(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, expired)
    warnings.simplefilter("ignore")  # Python's SyntaxWarnings about generated code
    sys.setrecursionlimit(10000)
    print(json.dumps({"jinja": jinja2.__version__, "python": sys.version.split()[0]}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        signal.alarm(timeout_seconds)
        try:
            r = render(req["source"], req.get("vars", {}))
        except Timeout:
            r = {"timeout": True}
        except RecursionError as e:
            r = {"error": "RecursionError: " + str(e)}
        finally:
            signal.alarm(0)
        print(json.dumps(r, ensure_ascii=True), flush=True)

def regenerate():
    cases = json.load(open(os.path.join(here, "cases.json")))
    out = []
    for c in cases:
        r = {"name": c["name"], "source": c["source"], "vars": c.get("vars", {})}
        r.update(render(c["source"], c.get("vars", {})))
        out.append(r)
    json.dump(out, open(os.path.join(here, "golden.json"), "w"), indent=1, ensure_ascii=True)
    print(len(out), "cases, Jinja", jinja2.__version__)

if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        regenerate()

"""Our own static rules for Django code, run in pytest (an AST checker in place of semgrep, which
is too heavy for this machine). Six rules, each proven on a bad snippet, then applied to all of our code:

  mass-assignment   Meta.fields = "__all__" (serializers, model forms), or **request.data / POST / GET / query_params
                    spread into a call (create(**...), filter(**...): over-posting and filter injection)
  csrf-exempt       csrf_exempt anywhere, or an enforce_csrf override that switches DRF's check off
  user-regex        re.compile/search/match/... with a pattern that is not a literal: user regexes go through re2
  user-url          a module that makes HTTP requests (httpx, requests, urllib, aiohttp, litellm) without
                    judging.llm.netguard, which validates the address and turns redirects off
  raw-redirect      redirect()/HttpResponseRedirect() whose target comes from request data or headers
  inline-nul        a NUL literal tested with in / not in: whether text can be stored is the rule of
                    annotations.text.storable
                    (it also refuses unpaired surrogates, which an inline NUL test lets through to the database)
"""

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OUR_CODE = ["annotations", "judging", "evalsite", "bench"]
REQUEST_INPUTS = {"data", "POST", "GET", "query_params", "META", "headers", "COOKIES", "body", "FILES"}
REGEX_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
HTTP_MODULES = {"httpx", "requests", "urllib.request", "aiohttp", "http.client", "urllib3", "litellm", "openai"}
REDIRECTS = {
    "redirect",
    "HttpResponseRedirect",
    "HttpResponsePermanentRedirect",
    "HttpResponseClientRedirect",
    "HttpResponseLocation",
}
# Modules allowed to talk HTTP on their own: the guard itself.
NETGUARD_MODULES = {"judging/llm/netguard.py"}
# The one place that tests text for NUL: the storable-text rule itself.
STORABLE_MODULES = {"annotations/text/storable.py"}


@dataclass(frozen=True)
class Violation:
    rule: str
    path: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.rule}] {self.detail}"


def _reads_request_input(node: ast.AST) -> bool:
    """True when the expression reads request.data/POST/GET/... (directly, via .dict(), dict(...), .get(...))."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in REQUEST_INPUTS:
            base = sub.value
            if isinstance(base, ast.Name) and base.id in {"request", "req"}:
                return True
            if isinstance(base, ast.Attribute) and base.attr == "request":
                return True
    return False


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _is_re_module_call(node: ast.Call, aliases: set[str]) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in REGEX_FUNCTIONS
        and isinstance(func.value, ast.Name)
        and func.value.id in aliases
    )


def _constant_pattern(node: ast.AST, constants: set[str]) -> bool:
    """Literals, module-level UPPER_CASE constants, re.escape(...) and f-strings / concatenations of those."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    if isinstance(node, ast.Name):
        return node.id in constants or node.id.isupper()
    if isinstance(node, ast.Attribute):
        return node.attr.isupper()
    if isinstance(node, ast.JoinedStr):
        return all(
            isinstance(part, ast.Constant) or _constant_pattern(part.value, constants)
            for part in node.values
            if isinstance(part, (ast.Constant, ast.FormattedValue))
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _constant_pattern(node.left, constants) and _constant_pattern(node.right, constants)
    if isinstance(node, ast.Call) and _call_name(node) in {"escape", "join"}:
        if _call_name(node) == "escape":
            return True
        # "|".join(re.escape(x) for x in ...) / "|".join(CONSTANTS)
        return all(
            _constant_pattern(arg, constants)
            or (isinstance(arg, (ast.GeneratorExp, ast.ListComp)) and _call_name_of(arg.elt) == "escape")
            for arg in node.args
        )
    return False


def _call_name_of(node: ast.AST) -> str:
    return _call_name(node) if isinstance(node, ast.Call) else ""


def _parameter_fed_only_constants(tree: ast.Module, call: ast.Call, pattern: ast.AST, constants: set[str]) -> bool:
    """A helper such as `def _rule(name, pattern): return re.compile(pattern)` is fine when every call of it in the
    module passes a constant pattern (and it is called at all)."""
    if not isinstance(pattern, ast.Name):
        return False
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not any(inner is call for inner in ast.walk(function)):
            continue
        params = [a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
        if pattern.id not in params:
            return False
        index = params.index(pattern.id)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _call_name(n) == function.name]
        if not calls:
            return False
        for site in calls:
            given = next((k.value for k in site.keywords if k.arg == pattern.id), None)
            if given is None and index < len(site.args):
                given = site.args[index]
            if given is None or not _constant_pattern(given, constants):
                return False
        return True
    return False


def _tests_for_nul(node: ast.Compare) -> bool:
    """A NUL literal on the left of in / not in, anywhere in a comparison chain."""
    lefts = [node.left, *node.comparators[:-1]]
    return any(
        isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, ast.Constant) and left.value == "\x00"
        for op, left in zip(node.ops, lefts, strict=True)
    )


def check_source(source: str, path: str) -> list[Violation]:
    tree = ast.parse(source)
    found: list[Violation] = []
    re_aliases: set[str] = set()
    imports_http: list[tuple[int, str]] = []
    imports_netguard = False
    module_constants: set[str] = set()

    for top in tree.body:
        if isinstance(top, ast.Assign):
            module_constants.update(t.id for t in top.targets if isinstance(t, ast.Name))
        elif isinstance(top, ast.AnnAssign) and isinstance(top.target, ast.Name):
            module_constants.add(top.target.id)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "re":
                    re_aliases.add(alias.asname or "re")
                if alias.name in HTTP_MODULES or alias.name.split(".")[0] in {"httpx", "requests", "aiohttp"}:
                    imports_http.append((node.lineno, alias.name))
                if alias.name.endswith("netguard"):
                    imports_netguard = True
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module in HTTP_MODULES or module.split(".")[0] in {"httpx", "requests", "aiohttp", "litellm"}:
                imports_http.append((node.lineno, module))
            if module.endswith("netguard") or any(alias.name == "netguard" for alias in node.names):
                imports_netguard = True
            if module == "django.views.decorators.csrf" and any(a.name == "csrf_exempt" for a in node.names):
                found.append(Violation("csrf-exempt", path, node.lineno, "imports csrf_exempt"))

        if isinstance(node, ast.ClassDef) and node.name == "Meta":
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "fields" for t in statement.targets)
                    and isinstance(statement.value, ast.Constant)
                    and statement.value.value == "__all__"
                ):
                    found.append(Violation("mass-assignment", path, statement.lineno, 'Meta.fields = "__all__"'))

        if isinstance(node, ast.FunctionDef) and node.name == "enforce_csrf":
            found.append(Violation("csrf-exempt", path, node.lineno, "overrides enforce_csrf"))

        if isinstance(node, ast.Name) and node.id == "csrf_exempt":
            found.append(Violation("csrf-exempt", path, node.lineno, "uses csrf_exempt"))

        if isinstance(node, ast.Compare) and path not in STORABLE_MODULES and _tests_for_nul(node):
            found.append(
                Violation(
                    "inline-nul", path, node.lineno, "tests for NUL inline; ask annotations.text.storable instead"
                )
            )

        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg is None and _reads_request_input(keyword.value):
                found.append(
                    Violation("mass-assignment", path, node.lineno, f"**request input spread into {_call_name(node)}()")
                )
        if _is_re_module_call(node, re_aliases):
            pattern = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "pattern"), None)
            if (
                pattern is not None
                and not _constant_pattern(pattern, module_constants)
                and not _parameter_fed_only_constants(tree, node, pattern, module_constants)
            ):
                found.append(
                    Violation(
                        "user-regex",
                        path,
                        node.lineno,
                        f"re.{_call_name(node)}() with a computed pattern; use re2 with a length cap",
                    )
                )
        if _call_name(node) in REDIRECTS and node.args and _reads_request_input(node.args[0]):
            found.append(Violation("raw-redirect", path, node.lineno, f"{_call_name(node)}() to a request value"))

    if imports_http and not imports_netguard and path not in NETGUARD_MODULES:
        line, module = imports_http[0]
        found.append(Violation("user-url", path, line, f"imports {module} without judging.llm.netguard"))
    return found


def check_tree(directories: list[str]) -> list[Violation]:
    found: list[Violation] = []
    for directory in directories:
        for path in sorted((PROJECT_ROOT / directory).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            relative = path.relative_to(PROJECT_ROOT).as_posix()
            found.extend(check_source(path.read_text(encoding="utf-8"), relative))
    return found


# Reviewed exceptions, each with the reason it is safe. Keep this list short.
ALLOWED = {
    # bench/ measures our gateway against a bare httpx client on the local test endpoint; it is not app code.
    ("user-url", "bench/"),
    # The table reader guesses the encoding of raw bytes: many NULs in a decoded head mean UTF-16 read as UTF-8. It
    # sniffs an encoding; it does not decide whether text can be stored.
    ("inline-nul", "annotations/datasets/tables.py"),
}


def _allowed(violation: Violation) -> bool:
    return any(violation.rule == rule and violation.path.startswith(prefix) for rule, prefix in ALLOWED)


def test_our_code_follows_the_rules() -> None:
    violations = [v for v in check_tree(OUR_CODE) if not _allowed(v)]
    assert violations == [], "\n".join(str(v) for v in violations)


BAD_SNIPPETS = {
    "mass-assignment": [
        "class S(serializers.ModelSerializer):\n    class Meta:\n        model = User\n        fields = '__all__'\n",
        "def v(request):\n    Rating.objects.create(**request.data)\n",
        "def v(request):\n    return Rating.objects.filter(**request.GET.dict())\n",
        "def v(self):\n    return Rating.objects.filter(**dict(self.request.query_params))\n",
    ],
    "csrf-exempt": [
        "from django.views.decorators.csrf import csrf_exempt\n@csrf_exempt\ndef v(request):\n    pass\n",
        "class A(SessionAuthentication):\n    def enforce_csrf(self, request):\n        return None\n",
    ],
    "user-regex": [
        "import re\ndef parse(config, text):\n    return re.search(config['regex'], text)\n",
        "import re as regex\ndef parse(p, text):\n    return regex.compile(p).match(text)\n",
        "import re\ndef parse(p, text):\n    return re.match(f'^{p}$', text)\n",
        "import re\ndef _rule(p):\n    return re.compile(p)\nA = _rule('x')\n"
        "def g(cfg):\n    return _rule(cfg['re'])\n",
    ],
    "user-url": [
        "import httpx\ndef fetch(url):\n    return httpx.get(url, follow_redirects=True)\n",
        "from urllib.request import urlopen\n",
        "import litellm\n",
    ],
    "raw-redirect": [
        "def v(request):\n    return redirect(request.GET['next'])\n",
        "def v(request):\n    return HttpResponseRedirect(request.META.get('HTTP_REFERER', '/'))\n",
        "def v(request):\n    return HttpResponseClientRedirect(request.POST.get('to'))\n",
    ],
    "inline-nul": [
        "def f(name):\n    if '\\x00' in name:\n        raise ValueError(name)\n",
        'def f(values):\n    return [v for v in values if "\\x00" not in v]\n',
        "def f(a, b):\n    return '\\0' in a or b\n",
    ],
}

GOOD_SNIPPETS = [
    "import re\nWORD = re.compile(r'\\w+')\nSEP = '|'\nX = re.compile(rf'a{SEP}b')\n",
    "import re\ndef f(words, t):\n    return re.search('|'.join(re.escape(w) for w in words), t)\n",
    "import re2\ndef parse(p, text):\n    return re2.search(p, text)\n",
    "import re\ndef _rule(name, p):\n    return re.compile(p, re.I)\n"
    "RULES = (_rule('a', r'\\bno'), _rule('b', p='x'))\n",
    "import httpx\nfrom judging.llm import netguard\n",
    "def v(request):\n    return redirect('home')\n",
    "class S(serializers.ModelSerializer):\n    class Meta:\n        fields = ['id', 'name']\n",
    "def v(request):\n    form = Form(data=request.POST)\n",
    "from annotations.text.storable import is_storable\ndef f(name):\n    return is_storable(name)\n",
    "def f(raw):\n    return raw.count('\\x00') > len(raw) // 4\n",
]


@pytest.mark.parametrize(
    ("rule", "snippet"), [(rule, snippet) for rule, snippets in BAD_SNIPPETS.items() for snippet in snippets]
)
def test_each_rule_catches_its_bad_pattern(rule: str, snippet: str) -> None:
    assert rule in {v.rule for v in check_source(snippet, "annotations/example.py")}


@pytest.mark.parametrize("snippet", GOOD_SNIPPETS)
def test_rules_pass_the_safe_forms(snippet: str) -> None:
    assert check_source(snippet, "annotations/example.py") == []

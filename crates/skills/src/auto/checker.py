# Static policy check of an auto-skill helper script. Reads the script on
# stdin, parses it with the standard library's ast module (never runs it)
# and prints one JSON line: {"ok": true} or {"rule", "line", "detail"}.
import ast
import json
import sys

DYNAMIC_CALLS = {"exec", "eval", "compile", "__import__", "breakpoint", "globals", "locals", "vars", "delattr", "setattr"}
DYNAMIC_MODULES = {"importlib", "imp", "runpy", "ctypes", "cffi", "code", "codeop", "marshal", "pickle", "dill", "builtins", "zipimport"}
PROCESS_MODULES = {"subprocess", "pty", "multiprocessing", "pexpect", "sh", "plumbum", "signal", "pdb", "concurrent"}
NETWORK_MODULES = {"socket", "ssl", "urllib", "urllib2", "urllib3", "http", "httplib", "requests", "httpx", "aiohttp",
                   "ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "nntplib", "xmlrpc", "socketserver",
                   "asyncio", "websocket", "websockets", "paramiko", "webbrowser", "selectors", "select"}
OS_PROCESS = {"system", "popen", "fork", "forkpty", "kill", "killpg", "posix_spawn", "posix_spawnp", "startfile"}
OS_DESTRUCTIVE = {"remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "truncate", "chmod",
                  "chown", "lchown", "fchmod", "fchown", "link", "symlink"}
SHUTIL_DESTRUCTIVE = {"rmtree", "move", "chown", "copytree", "copy", "copy2", "copyfile", "make_archive", "unpack_archive"}
METHOD_DESTRUCTIVE = {"rmtree", "unlink", "rmdir", "removedirs", "truncate", "chmod", "lchmod", "hardlink_to", "symlink_to"}
DUNDER_ATTRS = {"__builtins__", "__globals__", "__subclasses__", "__code__", "__import__", "__loader__", "__dict__",
                "__getattribute__", "__bases__", "__mro__", "__class__", "__reduce__", "__reduce_ex__"}


class Refused(Exception):
    def __init__(self, rule, node, detail):
        super().__init__(detail)
        self.rule, self.line, self.detail = rule, getattr(node, "lineno", 0), detail


def module_rule(name):
    root = name.split(".")[0]
    if root in DYNAMIC_MODULES:
        return "dynamic-exec"
    if root in PROCESS_MODULES:
        return "process-exec"
    if root in NETWORK_MODULES:
        return "network"
    return None


def os_rule(attr):
    if attr in OS_PROCESS or attr.startswith(("exec", "spawn")):
        return "process-exec"
    if attr in OS_DESTRUCTIVE:
        return "destructive-fs"
    return None


class Policy(ast.NodeVisitor):
    def __init__(self):
        self.aliases = {}

    def visit_Import(self, node):
        for alias in node.names:
            rule = module_rule(alias.name)
            if rule:
                raise Refused(rule, node, "import of " + alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        rule = module_rule(module)
        if rule:
            raise Refused(rule, node, "import from " + module)
        for alias in node.names:
            name = alias.name
            if module in ("os", "posix", "nt"):
                rule = os_rule(name)
                if rule:
                    raise Refused(rule, node, "import of %s.%s" % (module, name))
            if module == "shutil" and name in SHUTIL_DESTRUCTIVE:
                raise Refused("destructive-fs", node, "import of shutil." + name)
            if module in ("os", "shutil", "pathlib") and name == "*":
                raise Refused("dynamic-exec", node, "star import from " + module)
            self.aliases[alias.asname or name] = module + "." + name
        self.generic_visit(node)

    def resolve(self, node):
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return base + "." + node.attr if base else None
        return None

    def visit_Attribute(self, node):
        if node.attr in DUNDER_ATTRS:
            raise Refused("dynamic-exec", node, "access to " + node.attr)
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in ("__builtins__", "__import__"):
            raise Refused("dynamic-exec", node, "use of " + node.id)
        self.generic_visit(node)

    def visit_Call(self, node):
        target = self.resolve(node.func) or ""
        last = target.rsplit(".", 1)[-1]
        if isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_CALLS:
            raise Refused("dynamic-exec", node, "call of " + node.func.id)
        if target in DYNAMIC_CALLS:
            raise Refused("dynamic-exec", node, "call of " + target)
        if isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
                raise Refused("dynamic-exec", node, "getattr with a computed name")
            if str(node.args[1].value) in DUNDER_ATTRS or os_rule(str(node.args[1].value)):
                raise Refused("dynamic-exec", node, "getattr of " + str(node.args[1].value))
        head = target.split(".")[0]
        if head in ("os", "posix", "nt") and target.count(".") >= 1:
            rule = os_rule(last)
            if rule:
                raise Refused(rule, node, "call of " + target)
        if module_rule(target):
            raise Refused(module_rule(target), node, "call of " + target)
        if head == "shutil" and last in SHUTIL_DESTRUCTIVE:
            raise Refused("destructive-fs", node, "call of " + target)
        if isinstance(node.func, ast.Attribute) and node.func.attr in METHOD_DESTRUCTIVE:
            raise Refused("destructive-fs", node, "call of ." + node.func.attr + "()")
        self.generic_visit(node)


def main():
    source = sys.stdin.read()
    try:
        tree = ast.parse(source, filename="helper.py", mode="exec")
    except SyntaxError as error:
        print(json.dumps({"rule": "syntax", "line": error.lineno or 0, "detail": str(error.msg)}))
        return
    except ValueError as error:
        print(json.dumps({"rule": "syntax", "line": 0, "detail": str(error)}))
        return
    try:
        Policy().visit(tree)
    except Refused as refused:
        print(json.dumps({"rule": refused.rule, "line": refused.line, "detail": refused.detail}))
        return
    except RecursionError:
        print(json.dumps({"rule": "syntax", "line": 0, "detail": "nesting too deep"}))
        return
    print(json.dumps({"ok": True}))


main()

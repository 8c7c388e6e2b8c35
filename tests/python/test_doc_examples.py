"""Runs every shell example of README.md and docs/*.md against a real broker.

Why: the examples are what a reader copies first, and nothing else runs
them, so they drift from the binary (a renamed flag, an old error text, an
id the broker really chooses). This test runs them as written.

What is an example: each command (a line, with its `\\` continuation lines
and the lines of a quoted string that spans several) of a fenced `sh` or
`bash` block, and each `$ ` line of a `console` block. Lines that are only a
comment are not commands. `cargo run --release --` and
`target/release/sift` stand for the binary under test (`$SIFT_BIN`, else
`target/debug/sift`), which is also `sift` on the PATH, so the test never
runs cargo: a `cargo build` line is satisfied by that binary, and any other
cargo command must be marked `skip`.

Where: each document's examples run in a network namespace of their own
(only `lo`, up), beside a `sift broker` started there with its default
addresses (7400, 7480, 61613, 1883), so that brokers elsewhere on the
machine keep those ports. The broker's data is `./sift-data` of a temporary
directory, which is the examples' working directory too. The commands of a
block run in order in one bash, so that a shell variable one sets is seen
by the next, and each must exit 0. Namespaces need root: without it the
test is skipped, or fails when `SIFT_REQUIRE_NETNS=1`.

Markers: an HTML comment `<!-- example: ... -->` on the lines right before
a block (only blank lines between) says how to run it:

- `skip (REASON)`: the block is not run.
- `requires PROGRAM...`: the block is skipped where a program is missing.
- `fails [N...]`: commands N (numbered from 1 in the block; every command
  without N) must exit non-zero.
- `background [N...] [until TEXT | ready COMMAND]`: commands N never end by
  themselves (`sift sub`, `curl -N`); each is started, waited for until it
  printed something (or TEXT, or until the shell COMMAND succeeds), and
  killed when the block ends.
- `interrupt [N...] [until TEXT | ready COMMAND]`: the same, but once ready
  it is stopped with SIGINT, the reader's Ctrl-C, before the next command
  runs; it must then exit 0 or by that signal.
- `with [N...] OPTION [VALUE] ...`: commands N of the binary (all without
  N) run with these options: a value replaces the one written, an option the
  command lacks is added after its subcommand (a benchmark's `--quick`, or
  a smaller `--count`).
- `file NAME`: before a shell block, NAME is made in the working directory
  with 64 KiB of pseudo-random bytes; before another block (`xml`), that
  block's text is NAME.
"""

import dataclasses
import functools
import os
import pathlib
import random
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import HTTP_PREFIX, MQTT_PREFIX, NATIVE_PREFIX, REPOSITORY, STOMP_PREFIX, sift_binary

SHELL_LANGUAGES = {"sh", "bash", "console"}
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*example:\s*(?P<kind>[a-z]+)\b\s*(?P<argument>.*?)\s*-->\s*$")
CARGO_RUN = re.compile(r"\bcargo run --release --(?=\s|$)")
RELEASE_BINARY = re.compile(r"(?<![\w./-])target/release/sift\b")
CARGO_BUILD = re.compile(r"^\s*cargo build\b")
CARGO = re.compile(r"(?:^|[\s;&|(])cargo\s")
SIFT_SUBCOMMAND = re.compile(r"(?<![\w./-])sift(?![\w./-])(?:[ \t]+[a-z][a-z0-9-]*)*")
CONDITION = re.compile(r"^(?P<numbers>[\d,\s]*?)\s*(?:(?P<how>until|ready)\s+(?P<condition>.+))?$")
READY_PREFIXES = (NATIVE_PREFIX, HTTP_PREFIX, STOMP_PREFIX, MQTT_PREFIX)

COMMAND_SECONDS = 90
READY_SECONDS = 20
BROKER_SECONDS = 30
GENERATED_FILE_BYTES = 64 * 1024
OUTPUT_SHOWN_CHARS = 4000


class MarkerError(Exception):
    """A marker or block the runner cannot follow: a mistake in the document."""


@dataclasses.dataclass
class Marker:
    line: int
    kind: str
    argument: str


@dataclasses.dataclass
class Block:
    document: pathlib.Path
    line: int
    language: str
    lines: list
    markers: list

    @property
    def where(self):
        return place(self.document, self.line)

    @property
    def text(self):
        return "".join(line + "\n" for line in self.lines)


@dataclasses.dataclass
class Command:
    """One example: where it starts, its text as written, and how to run it."""
    line: int
    text: str
    script: str = ""
    mode: str = "foreground"
    until: str = None
    ready: str = None
    expect_failure: bool = False
    not_run: str = None


@dataclasses.dataclass
class Plan:
    """A block made ready to run: its commands, or why it is skipped."""
    block: Block
    commands: list
    skip: str = None


# Reading the documents


def documents():
    return [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]


def place(document, line):
    """`docs/HTTP.md:12`: a line of a document, as failures name it."""
    return f"{document.relative_to(REPOSITORY)}:{line}"


def read_blocks(document):
    """Every fenced block of a document with the markers written before it."""
    blocks, markers, open_block, indent = [], [], None, ""
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if open_block is not None:
            if fence and not fence["language"]:
                blocks.append(open_block)
                open_block = None
            else:
                open_block.lines.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            continue
        marker = MARKER.match(line)
        if fence:
            open_block, indent, markers = Block(document, number, fence["language"], [], markers), fence["indent"], []
        elif marker:
            markers.append(Marker(number, marker["kind"], marker["argument"]))
        elif "<!-- example" in line:
            raise MarkerError(f"{place(document, number)}: write a marker as `<!-- example: KIND ... -->`, alone")
        elif line.strip() and markers:
            raise MarkerError(f"{place(document, markers[0].line)}: a marker must come right before a fenced block")
    return blocks


def split_commands(block):
    """The commands of a shell block, each with the document line it starts on."""
    if block.language == "console":
        return [Command(block.line + 1 + offset, line.strip()[2:]) for offset, line in enumerate(block.lines)
                if line.strip().startswith("$ ")]
    commands, pending, start = [], [], None
    for offset, line in enumerate(block.lines):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = block.line + 1 + offset
        pending.append(line)
        text = "\n".join(pending)
        if not is_unfinished(text):
            commands.append(Command(start, text))
            pending = []
    if pending:
        raise MarkerError(f"{block.where}: the block ends inside a command (an open quote or a trailing backslash)")
    return commands


def is_unfinished(text):
    """True when the shell would read on: an open quote or a final backslash."""
    quote, index, word_start = None, 0, True
    while index < len(text):
        char = text[index]
        if quote == "'":
            quote = None if char == "'" else quote
        elif char == "\\":
            if index + 1 == len(text):
                return True
            index += 1
        elif quote == '"':
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and word_start:
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        word_start = quote is None and (char.isspace() or char in ";&|(")
        index += 1
    return quote is not None


# Markers


def plan_block(block):
    """Applies the block's markers to its commands; MarkerError when one is wrong."""
    commands = [with_binary(command) for command in split_commands(block)]
    plan = Plan(block, commands)
    for marker in block.markers:
        apply = MARKER_KINDS.get(marker.kind)
        if apply is None:
            raise MarkerError(f"{place(block.document, marker.line)}: unknown marker `{marker.kind}`")
        try:
            apply(plan, marker.argument)
        except MarkerError as error:
            raise MarkerError(f"{place(block.document, marker.line)}: {error}") from None
    for command in commands:
        if not command.not_run and not plan.skip and CARGO.search(command.script):
            raise MarkerError(f"{place(block.document, command.line)}: the example runs cargo; mark its block skip")
    return plan


def with_binary(command):
    """The command to run: the binary under test for cargo run and release builds."""
    script = RELEASE_BINARY.sub("sift", CARGO_RUN.sub("sift", command.text))
    not_run = "the binary under test is built already" if CARGO_BUILD.match(script) else None
    return dataclasses.replace(command, script=script, not_run=not_run)


def chosen(plan, numbers):
    """The commands numbered (from 1) in `numbers`, every one when it is empty."""
    indices = [int(number) for number in re.split(r"[\s,]+", numbers.strip()) if number]
    if any(index < 1 or index > len(plan.commands) for index in indices):
        raise MarkerError(f"the block has commands 1 to {len(plan.commands)}, not {numbers.strip()}")
    return [plan.commands[index - 1] for index in indices] if indices else plan.commands


def mark_skip(plan, argument):
    reason = re.fullmatch(r"\((.+)\)", argument)
    if not reason:
        raise MarkerError("skip needs a reason in parentheses")
    plan.skip = reason[1]


def mark_requires(plan, argument):
    if not argument.split():
        raise MarkerError("requires needs a program")
    missing = [program for program in argument.split() if shutil.which(program) is None]
    if missing and not plan.skip:
        plan.skip = f"{' and '.join(missing)} not installed"


def mark_fails(plan, argument):
    for command in chosen(plan, argument):
        command.expect_failure = True


def mark_running(mode):
    def mark(plan, argument):
        parts = CONDITION.match(argument)
        if parts is None:
            raise MarkerError(f"{mode} takes command numbers, then `until TEXT` or `ready COMMAND`")
        for command in chosen(plan, parts["numbers"]):
            command.mode = mode
            command.until = parts["condition"] if parts["how"] == "until" else None
            command.ready = parts["condition"] if parts["how"] == "ready" else None
    return mark


def mark_with(plan, argument):
    words = shlex.split(argument)
    count = next((index for index, word in enumerate(words) if not word.isdigit()), len(words))
    numbers, options = " ".join(words[:count]), parse_options(words[count:])
    changed = False
    for command in chosen(plan, numbers):
        script = set_options(command.script, options)
        changed |= script != command.script
        command.script = script
    if not changed:
        raise MarkerError(f"`with {argument}` changes no command")


def parse_options(words):
    options = []
    for word in words:
        if word.startswith("--"):
            options.append([word, None])
        elif options and options[-1][1] is None:
            options[-1][1] = word
        else:
            raise MarkerError(f"`{word}` is not an option or its value")
    return options


def set_options(script, options):
    """The script with the options set on each command of the binary: a value
    written is replaced, and options not written are added after the subcommand."""
    missing = []
    for option, value in options:
        value_pattern = "" if value is None else r"(?:[ \t]+|=)\S+"
        written = re.compile(rf"(?<!\S){re.escape(option)}{value_pattern}(?!\S)")
        wanted = option if value is None else f"{option} {value}"
        if written.search(script):
            script = written.sub(lambda _: wanted, script)
        else:
            missing.append(wanted)
    if missing:
        script = SIFT_SUBCOMMAND.sub(lambda found: " ".join([found[0], *missing]), script)
    return script


def mark_file(plan, argument):
    if not re.fullmatch(r"[\w.-]+", argument):
        raise MarkerError("file needs a plain file name")


MARKER_KINDS = {
    "skip": mark_skip,
    "requires": mark_requires,
    "fails": mark_fails,
    "background": mark_running("background"),
    "interrupt": mark_running("interrupt"),
    "with": mark_with,
    "file": mark_file,
}


def given_files(blocks):
    """The files the `file` markers make: name and bytes."""
    files = {}
    for block in blocks:
        for marker in block.markers:
            if marker.kind != "file":
                continue
            if block.language in SHELL_LANGUAGES:
                files[marker.argument] = random.Random(marker.argument).randbytes(GENERATED_FILE_BYTES)
            else:
                files[marker.argument] = block.text.encode()
    return files


def shell_plans(document):
    return [plan_block(block) for block in read_blocks(document) if block.language in SHELL_LANGUAGES]


# Network namespaces


@functools.cache
def netns_unavailable():
    """Why `ip netns` cannot be used here, or None when it can."""
    if os.geteuid() != 0:
        return "the test is not running as root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    probe = f"sift-doc-probe-{os.getpid()}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"network namespaces cannot be created: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


class Namespace:
    """A network namespace with only `lo`, up; deleted on exit, pass or fail."""

    count = 0

    def __init__(self):
        Namespace.count += 1
        self.name = f"sift-doc-{os.getpid()}-{Namespace.count}"

    def __enter__(self):
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_):
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True)

    def command(self, *argv):
        return ["ip", "netns", "exec", self.name, *argv]


def wait_until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def read_text(path):
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


class NamespaceBroker:
    """`sift broker` in the namespace with its default addresses; killed by PID."""

    def __init__(self, namespace, workdir, env):
        self.output = workdir.parent / "broker.out"
        self.errors = workdir.parent / "broker.err"
        with open(self.output, "w") as output, open(self.errors, "w") as errors:
            self.process = subprocess.Popen(
                namespace.command(sift_binary(), "broker", "--data", str(workdir / "sift-data")),
                cwd=workdir, env=env, stdout=output, stderr=errors, stdin=subprocess.DEVNULL)
        wait_until(lambda: self.ready() or self.process.poll() is not None, BROKER_SECONDS)
        if not self.ready():
            self.stop()
            raise RuntimeError(f"the broker did not print its four addresses:\n{read_text(self.output)}"
                               f"{read_text(self.errors)[-OUTPUT_SHOWN_CHARS:]}")

    def ready(self):
        lines = read_text(self.output).splitlines()
        return all(any(line.startswith(prefix) for line in lines) for prefix in READY_PREFIXES)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


# Running a block


class Shell:
    """One bash in the namespace that runs a block's commands in order.

    Commands arrive on its standard input; after each, it writes the exit
    status (or a background command's PID) on a pipe of its own, so that a
    wait for it has a deadline. Each command's output goes to a file.
    """

    def __init__(self, namespace, workdir, env):
        self.replies, reply_end = os.pipe()
        self.reply_fd = reply_end
        self.process = subprocess.Popen(
            namespace.command("bash", "--noprofile", "--norc"), cwd=workdir, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(reply_end,), start_new_session=True)
        os.close(reply_end)
        self.buffer = b""
        self.jobs = []

    def run(self, script, log, seconds):
        """Runs a command to its end; its exit status, or None after `seconds`."""
        self.send(f"{{ {script}\n}} >{shlex.quote(str(log))} 2>&1 </dev/null; echo \"$?\" >&{self.reply_fd}")
        return self.reply(seconds)

    def start(self, script, log):
        """Starts a command in a process group of its own; its PID."""
        self.send(f"set -m; {{ {script}\n}} >{shlex.quote(str(log))} 2>&1 </dev/null & set +m; "
                  f"echo \"$!\" >&{self.reply_fd}")
        pid = self.reply(READY_SECONDS)
        if pid is not None:
            self.jobs.append(pid)
        return pid

    def status(self, pid, seconds):
        """Waits for a started command to end; its exit status, or None."""
        self.send(f"wait {pid}; echo \"$?\" >&{self.reply_fd}")
        return self.reply(seconds)

    def send(self, script):
        self.process.stdin.write(script + "\n")
        self.process.stdin.flush()

    def reply(self, seconds):
        deadline = time.monotonic() + seconds
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                return None
            chunk = os.read(self.replies, 4096)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return int(line)

    def close(self):
        """Kills what the block started, by the process groups of the PIDs."""
        for pid in [*self.jobs, self.process.pid]:
            signal_group(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        os.close(self.replies)


def signal_group(pid, number):
    try:
        os.killpg(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def has_ended(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


class BlockRun:
    """Runs the commands of one block in one Shell and collects failures."""

    def __init__(self, plan, shell, logs):
        self.plan, self.shell, self.logs = plan, shell, logs
        self.failures, self.running = [], []

    def run(self):
        for number, command in enumerate(self.plan.commands, 1):
            if command.not_run:
                continue
            log = self.logs / f"{self.plan.block.line}-{number}.log"
            if not self.run_command(command, log):
                return
        self.check_running()

    def check_running(self):
        """Fails the background commands that ended by themselves with an error."""
        for command, log, pid in self.running:
            if has_ended(pid):
                status = self.shell.status(pid, READY_SECONDS)
                if status != 0:
                    self.fail(command, log, f"ended by itself with status {status} while the block ran")

    def fail(self, command, log, problem):
        output = read_text(log)[-OUTPUT_SHOWN_CHARS:].rstrip()
        where = place(self.plan.block.document, command.line)
        shown = command.text if command.text == command.script else f"{command.text}\n    ran: {command.script}"
        self.failures.append(f"{where}: {shown}\n    {problem}\n    output:\n{indent(output or '(none)')}")

    def run_command(self, command, log):
        """False when the shell can take no further command."""
        if command.mode == "foreground":
            status = self.shell.run(command.script, log, COMMAND_SECONDS)
            if status is None:
                self.fail(command, log, f"did not end within {COMMAND_SECONDS} s; the rest of the block was not run")
                return False
            if (status != 0) != command.expect_failure:
                self.fail(command, log, f"exited with status {status}" +
                          (" but the example is marked `fails`" if command.expect_failure else ""))
            return True
        return self.run_long(command, log)

    def run_long(self, command, log):
        pid = self.shell.start(command.script, log)
        if pid is None:
            self.fail(command, log, "could not be started")
            return False
        if not wait_until(lambda: self.is_ready(command, log) or has_ended(pid), READY_SECONDS):
            self.fail(command, log, f"not ready within {READY_SECONDS} s ({self.readiness(command)})")
            return True
        if not self.is_ready(command, log):
            self.fail(command, log, f"ended with status {self.shell.status(pid, READY_SECONDS)} before it was ready "
                                    f"({self.readiness(command)})")
            return True
        if command.mode == "interrupt":
            return self.interrupt(command, log, pid)
        self.running.append((command, log, pid))
        return True

    def is_ready(self, command, log):
        if command.ready:
            check = f"timeout -k 1 {READY_SECONDS} bash -c {shlex.quote(command.ready)}"
            return self.shell.run(check, os.devnull, READY_SECONDS + 5) == 0
        if command.until:
            return command.until in read_text(log)
        return bool(read_text(log).strip())

    @staticmethod
    def readiness(command):
        if command.ready:
            return f"waiting until `{command.ready}` succeeds"
        return f"waiting for `{command.until}`" if command.until else "waiting for its first output"

    def interrupt(self, command, log, pid):
        signal_group(pid, signal.SIGINT)
        status = self.shell.status(pid, READY_SECONDS)
        if status is None:
            signal_group(pid, signal.SIGKILL)
            self.fail(command, log, "did not stop on SIGINT")
            return self.shell.reply(READY_SECONDS) is not None
        if status not in (0, 128 + signal.SIGINT):
            self.fail(command, log, f"exited with status {status} on SIGINT")
        return True


def indent(text):
    return "\n".join("      " + line for line in text.splitlines())


# The document run


def examples_env(bin_dir):
    """The environment of the examples: `sift` on the PATH is the binary under test."""
    (bin_dir / "sift").symlink_to(pathlib.Path(sift_binary()).resolve())
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_document(document):
    """Runs a document's examples; the failures, and what was not run with why."""
    plans = shell_plans(document)
    failures = []
    with tempfile.TemporaryDirectory(prefix="sift-doc-") as temporary, Namespace() as namespace:
        root = pathlib.Path(temporary)
        workdir, logs, bin_dir = root / "work", root / "logs", root / "bin"
        for directory in (workdir, logs, bin_dir):
            directory.mkdir()
        for name, content in given_files(read_blocks(document)).items():
            (workdir / name).write_bytes(content)
        env = examples_env(bin_dir)
        broker = NamespaceBroker(namespace, workdir, env)
        try:
            for plan in plans:
                if not plan.skip:
                    failures += run_block(plan, namespace, workdir, logs, env)
            if broker.process.poll() is not None:
                failures.append(f"the broker exited with status {broker.process.returncode} during the examples:\n"
                                f"{indent(read_text(broker.errors)[-OUTPUT_SHOWN_CHARS:])}")
        finally:
            broker.stop()
    return failures, not_run(plans)


def not_run(plans):
    """The blocks and commands not run, with why: `FILE:LINE: reason`."""
    lines = []
    for plan in plans:
        if plan.skip:
            lines.append(f"{plan.block.where}: {plan.skip}")
            continue
        lines += [f"{place(plan.block.document, command.line)}: {command.not_run}"
                  for command in plan.commands if command.not_run]
    return lines


def run_block(plan, namespace, workdir, logs, env):
    shell = Shell(namespace, workdir, env)
    block_run = BlockRun(plan, shell, logs)
    try:
        block_run.run()
    finally:
        shell.close()
    return block_run.failures


def documents_with_examples():
    return [document for document in documents()
            if any(block.language in SHELL_LANGUAGES for block in read_blocks(document))]


def test_markers_are_valid():
    """Every marker parses and names commands its block has (no namespace needed)."""
    for document in documents():
        shell_plans(document)


@pytest.mark.parametrize("document", documents_with_examples(), ids=lambda path: path.name)
def test_examples_run(document):
    reason = netns_unavailable()
    if reason:
        if os.environ.get("SIFT_REQUIRE_NETNS") == "1":
            pytest.fail(f"SIFT_REQUIRE_NETNS=1 but network namespaces cannot be used: {reason}")
        pytest.skip(f"the examples run in a network namespace: {reason} (SIFT_REQUIRE_NETNS=1 makes this fail)")
    failures, skipped = run_document(document)
    for line in skipped:
        print(f"not run: {line}")
    assert not failures, f"{len(failures)} example(s) of {document.name} are false:\n\n" + "\n\n".join(failures)

"""Tests for init/unitfile.py: the systemd-subset unit-file parser."""
from __future__ import annotations

import math
import os
import signal
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from init.unitconfig import KillMode, OutputTarget, RestartPolicy, ServiceType, UnitConfig
from init.unitfile import Diagnostic, LoadResult, load_unit, load_unit_dir, parse_timespan, parse_unit, split_exec

PATH = "/units/demo.service"


def parse(text: str, path: str = PATH) -> LoadResult:
    return parse_unit(textwrap.dedent(text).lstrip("\n"), path)


def config_of(text: str, path: str = PATH) -> UnitConfig:
    result = parse(text, path)
    assert result.error is None, str(result.error)
    assert result.config is not None
    return result.config


def service(body: str, path: str = PATH) -> LoadResult:
    """A unit whose [Service] section is `body` plus a valid ExecStart (line 3 onwards is body)."""
    return parse_unit("[Service]\nExecStart=/bin/true\n" + textwrap.dedent(body).lstrip("\n"), path)


def messages(result: LoadResult) -> list[str]:
    return [warning.message for warning in result.warnings]


# --- realistic units ------------------------------------------------------------------------------


def test_realistic_kubelet_service():
    result = parse(
        """
        [Unit]
        Description=kubelet: The Kubernetes Node Agent
        Documentation=https://kubernetes.io/docs/
        Wants=network-online.target
        After=network-online.target
        StartLimitIntervalSec=0

        [Service]
        Type=notify
        WatchdogSec=30s
        Environment="A=1" B=2
        ExecStart=/usr/bin/python -m kubelet --node node-0
        Restart=always
        RestartSec=10

        [Install]
        WantedBy=multi-user.target
        """,
        "/node-0/units/kubelet.service",
    )
    assert result.error is None and result.warnings == ()
    assert result.name == "kubelet.service"
    cfg = result.config
    assert cfg.name == "kubelet.service" and cfg.path == "/node-0/units/kubelet.service"
    assert cfg.exec_start == ("/usr/bin/python", "-m", "kubelet", "--node", "node-0")
    assert cfg.description == "kubelet: The Kubernetes Node Agent"
    assert cfg.wants == ("network-online.target",) and cfg.after == ("network-online.target",)
    assert cfg.start_limit_interval == 0.0
    assert cfg.type is ServiceType.NOTIFY
    assert cfg.watchdog_sec == 30.0
    assert cfg.environment == (("A", "1"), ("B", "2"))
    assert cfg.restart is RestartPolicy.ALWAYS
    assert cfg.restart_sec == 10.0
    # untouched settings keep systemd's defaults
    assert cfg.timeout_start == 90.0 and cfg.kill_mode is KillMode.CONTROL_GROUP and not cfg.exec_ignore_failure


def test_kubeadm_legacy_start_limit_interval_in_service_section():
    cfg = config_of(
        """
        [Service]
        ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_EXTRA_ARGS
        Environment="KUBELET_KUBECONFIG_ARGS=--kubeconfig=/etc/kubernetes/kubelet.conf --v=2"
        Restart=always
        StartLimitInterval=0
        StartLimitBurst=3
        """
    )
    assert cfg.start_limit_interval == 0.0 and cfg.start_limit_burst == 3
    # $VAR as a whole word splits into words; an unset one vanishes
    assert cfg.exec_start == ("/usr/bin/kubelet", "--kubeconfig=/etc/kubernetes/kubelet.conf", "--v=2")


def test_every_supported_service_key():
    cfg = config_of(
        """
        [Unit]
        Requires=store.service
        Before=other.service
        StartLimitBurst=7
        [Service]
        Type=exec
        ExecStart=-/bin/server
        Restart=on-failure
        RestartSec=250ms
        RestartSteps=4
        RestartMaxDelaySec=1min
        SuccessExitStatus=3 SIGUSR1 HUP
        RestartPreventExitStatus=42 SIGKILL
        TimeoutStartSec=5
        TimeoutStopSec=infinity
        WatchdogSec=0
        WatchdogSignal=SIGUSR2
        KillMode=mixed
        KillSignal=INT
        SendSIGKILL=no
        WorkingDirectory=-/srv/%N
        StandardOutput=file:/var/log/%n.out
        StandardError=append:/var/log/demo.err
        """
    )
    assert cfg.requires == ("store.service",)
    assert cfg.start_limit_burst == 7
    assert cfg.type is ServiceType.EXEC
    assert cfg.exec_start == ("/bin/server",) and cfg.exec_ignore_failure
    assert cfg.restart is RestartPolicy.ON_FAILURE
    assert cfg.restart_sec == pytest.approx(0.25)
    assert cfg.restart_steps == 4 and cfg.restart_max_delay == 60.0
    assert cfg.success_exit_status == {3} and cfg.success_signals == {signal.SIGUSR1, signal.SIGHUP}
    assert cfg.restart_prevent_exit_status == {42} and cfg.restart_prevent_signals == {signal.SIGKILL}
    assert cfg.timeout_start == 5.0 and cfg.timeout_stop == math.inf
    assert cfg.watchdog_sec == 0.0 and cfg.watchdog_signal == signal.SIGUSR2
    assert cfg.kill_mode is KillMode.MIXED and cfg.kill_signal == signal.SIGINT and cfg.send_sigkill is False
    assert cfg.working_directory == "/srv/demo"
    assert cfg.standard_output == OutputTarget("file", "/var/log/demo.service.out")
    assert cfg.standard_error == OutputTarget("append", "/var/log/demo.err")


@pytest.mark.parametrize(
    "line, field, expected",
    [
        ("TimeoutSec=0", "timeout_start", math.inf),
        ("TimeoutSec=0", "timeout_stop", math.inf),
        ("TimeoutSec=3s", "timeout_stop", 3.0),
        ("TimeoutStartSec=0", "timeout_start", math.inf),
        ("TimeoutStopSec=0", "timeout_stop", math.inf),
        ("KillSignal=9", "kill_signal", 9),
        ("KillSignal=SIGRTMIN+2", "kill_signal", signal.SIGRTMIN + 2),
        ("SendSIGKILL=On", "send_sigkill", True),
        ("SendSIGKILL=0", "send_sigkill", False),
        ("StandardOutput=journal", "standard_output", OutputTarget("inherit")),
        ("StandardOutput=null", "standard_output", OutputTarget("null")),
        ("StandardOutput=truncate:/tmp/x", "standard_output", OutputTarget("file", "/tmp/x")),
        ("WorkingDirectory=~", "working_directory", "~"),
        ("Environment=EMPTY=", "environment", (("EMPTY", ""),)),
        ("Environment='SP=a b' \"Q=it's\" T=x\\ty", "environment", (("SP", "a b"), ("Q", "it's"), ("T", "x\ty"))),
        ("Environment=U=%n", "environment", (("U", "demo.service"),)),
        ("Type=simple", "type", ServiceType.SIMPLE),
    ],
)
def test_value_conversions(line, field, expected):
    result = service(line)
    assert result.warnings == ()
    assert getattr(result.config, field) == expected


# --- errors: the unit fails to load ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("[Service]\nExecStart=/bin/true\nthis is not an assignment\n", 3, "Syntax error"),
        ("[Service]\nExecStart=/bin/true\n=value\n", 3, "key name"),
        ("[Unit]\nDescription=x\n", 0, "Service has no ExecStart= setting, refusing."),
        ("[Service]\nExecStart=/bin/a\nExecStart=/bin/b\n", 3, "more than one ExecStart= setting"),
        ("[Service]\nExecStart=/bin/a ; /bin/b\n", 2, "multiple commands are not supported"),
        ("ExecStart=/bin/true\n[Service]\n", 1, "outside of any section"),
        ("# comment\n\nDescription=x\n", 3, "outside of any section"),
        ("[Service\nExecStart=/bin/true\n", 1, "Invalid section header"),
        ("[Service]\nExecStart=bin/true\n", 2, "neither an absolute path nor a bare program name"),
        ("[Service]\nExecStart=\"\"\n", 2, "empty executable path"),
        ("[Service]\nExecStart=-\n", 2, "empty executable path"),
        ("[Service]\nExecStart=/bin/echo \"unterminated\n", 2, "unterminated"),
        ("[Service]\nExecStart=/bin/echo %H\n", 2, "unsupported specifier '%H'"),
        ("[Service]\nExecStart=/bin/echo \\q\n", 2, "invalid escape"),
        ("[Service]\nExecStart=/bin/true\nDescription=a\x00b\n", 3, "NUL"),
        ("[Service]\nExecStart=/bin/a\nExecStart=\n", 0, "no ExecStart"),
    ],
)
def test_errors_fail_the_unit(text, line, fragment):
    result = parse_unit(text, PATH)
    assert result.config is None
    assert result.error is not None
    assert result.error.line == line
    assert fragment in result.error.message
    assert str(result.error).startswith(f"{PATH}:{line}: ")


def test_syntax_error_message_names_path_and_line():
    result = parse_unit("[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/true\nbogus\n", "/u/x.service")
    assert str(result.error).startswith("/u/x.service:6: Syntax error")
    assert result.error == Diagnostic("/u/x.service", 6, result.error.message)


def test_two_exec_start_error_is_systemds_wording():
    result = parse_unit("[Service]\nExecStart=/bin/a\nExecStart=/bin/b\n", PATH)
    assert result.error.message == (
        "Service has more than one ExecStart= setting, which is only allowed for Type=oneshot services. Refusing."
    )


def test_error_result_still_reports_earlier_warnings():
    result = parse_unit("[Service]\nBogus=1\nExecStart=/bin/a ;\n", PATH)
    assert result.config is None and result.error.line == 3
    assert messages(result) == ["Unknown key name 'Bogus' in section 'Service', ignoring."]


# --- warnings: the assignment is ignored, the unit loads -----------------------------------------


def test_unknown_key_uses_systemds_wording():
    result = service("Foo=bar\n")
    assert result.config is not None
    assert result.warnings == (Diagnostic(PATH, 3, "Unknown key name 'Foo' in section 'Service', ignoring."),)


def test_bad_restart_value_keeps_default_and_names_key_and_line():
    result = service("Restart=sometimes\n")
    assert result.config.restart is RestartPolicy.NO
    [warning] = result.warnings
    assert warning.line == 3 and "Restart=" in warning.message and "sometimes" in warning.message


def test_bad_value_keeps_previous_assignment():
    result = service("RestartSec=5\nRestartSec=abc\n")
    assert result.config.restart_sec == 5.0
    assert [w.line for w in result.warnings] == [4] and "RestartSec=" in result.warnings[0].message


def test_unknown_section_warns_once_and_ignores_its_keys():
    result = parse_unit("[Service]\nExecStart=/bin/true\n[Foo]\nRestart=always\nBar=1\n", PATH)
    assert result.config.restart is RestartPolicy.NO
    assert result.warnings == (Diagnostic(PATH, 3, "Unknown section 'Foo'. Ignoring."),)


def test_extension_sections_and_keys_are_ignored_silently():
    result = parse_unit("[X-Mine]\nWhatever=1\n[Service]\nX-Note=2\nExecStart=/bin/true\n", PATH)
    assert result.config is not None and result.warnings == ()


def test_install_section_keys_are_accepted_silently():
    text = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=a.target\nRequiredBy=b\nAlias=c\nAlso=d\nDefaultInstance=e\n"
    assert parse_unit(text, PATH).warnings == ()
    assert messages(parse_unit(text + "Bogus=1\n", PATH)) == ["Unknown key name 'Bogus' in section 'Install', ignoring."]


@pytest.mark.parametrize(
    "line, field, fragment",
    [
        ("Type=forking", "type", "'forking' is not supported"),
        ("Type=oneshot", "type", "not supported"),
        ("Type=weird", "type", "not one of simple, exec, notify"),
        ("KillMode=none", "kill_mode", "'none' is not supported"),
        ("KillSignal=SIGNOPE", "kill_signal", "not a signal name"),
        ("KillSignal=0", "kill_signal", "out of range"),
        ("SendSIGKILL=maybe", "send_sigkill", "not a boolean"),
        ("StartLimitBurst=-1", "start_limit_burst", "not an unsigned integer"),
        ("StandardOutput=tty", "standard_output", "not supported"),
        ("StandardOutput=file:relative/path", "standard_output", "not absolute"),
        ("WorkingDirectory=relative", "working_directory", "not absolute"),
        ("WorkingDirectory=/srv/%Z", "working_directory", "unsupported specifier"),
        ("TimeoutSec=forever", "timeout_start", "invalid time span"),
        ("Environment=\"A=1", "environment", "unterminated"),
    ],
)
def test_invalid_values_warn_and_keep_the_default(line, field, fragment):
    result = service(line)
    default = UnitConfig(name="x", path="x", exec_start=("x",))
    assert getattr(result.config, field) == getattr(default, field)
    [warning] = result.warnings
    assert warning.line == 3 and fragment in warning.message
    assert line.split("=", 1)[0] + "=" in warning.message


def test_bad_list_entries_are_skipped_individually():
    result = service("Environment=GOOD=1 novalue 9BAD=2 OK=%n\nSuccessExitStatus=1 256 SIGBOGUS TERM\n")
    cfg = result.config
    assert cfg.environment == (("GOOD", "1"), ("OK", "demo.service"))
    assert cfg.success_exit_status == {1} and cfg.success_signals == {signal.SIGTERM}
    assert [w.line for w in result.warnings] == [3, 3, 4, 4]
    assert "Invalid environment assignment" in result.warnings[0].message


@pytest.mark.parametrize("prefix", ["+", "!", "!!"])
def test_privilege_prefixes_are_accepted_with_a_warning(prefix):
    result = parse_unit(f"[Service]\nExecStart={prefix}/bin/true\n", PATH)
    assert result.config.exec_start == ("/bin/true",)
    [warning] = result.warnings
    assert warning.line == 2 and "has no effect" in warning.message


def test_at_prefix_drops_argv0_with_a_warning():
    result = parse_unit("[Service]\nExecStart=@/bin/sleep my-sleeper 5\n", PATH)
    assert result.config.exec_start == ("/bin/sleep", "5")
    assert "'@' is not supported" in result.warnings[0].message


# --- line structure -------------------------------------------------------------------------------


def test_continuation_lines_join_with_a_space_and_report_the_first_line():
    result = parse_unit(
        "[Service]\nExecStart=/bin/echo a\\\n  b \\\n# a comment inside the continuation\n; another\nc\nBogus=1\\\n2\n",
        PATH,
    )
    assert result.config.exec_start == ("/bin/echo", "a", "b", "c")
    assert result.warnings == (Diagnostic(PATH, 7, "Unknown key name 'Bogus' in section 'Service', ignoring."),)


def test_escaped_backslash_at_end_of_line_is_not_a_continuation():
    cfg = config_of("[Service]\nExecStart=/bin/echo a\\\\\nRestart=always\n")
    assert cfg.exec_start == ("/bin/echo", "a\\") and cfg.restart is RestartPolicy.ALWAYS


def test_continuation_at_end_of_file_and_crlf_line_endings():
    assert config_of("[Service]\r\nRestart=always\r\nExecStart=/bin/echo x\\").exec_start == ("/bin/echo", "x")
    assert config_of("\ufeff[Service]\rExecStart=/bin/true\r").exec_start == ("/bin/true",)


def test_comments_and_whitespace_around_keys_and_values():
    cfg = config_of(
        """
        # leading comment
        ; semicolon comment
        [Unit]
           Description  =   spaced out   
        [Service]
        ExecStart = /bin/true
        """
    )
    assert cfg.description == "spaced out" and cfg.exec_start == ("/bin/true",)


def test_list_keys_accumulate_and_empty_assignment_resets():
    cfg = config_of(
        """
        [Unit]
        After=a.service b.service
        After=b.service c
        Wants=x.service
        Wants=
        Wants=y.service
        [Service]
        ExecStart=/bin/true
        Environment=A=1 B=2
        Environment=A=3
        SuccessExitStatus=1
        SuccessExitStatus=
        SuccessExitStatus=2 SIGUSR2
        """
    )
    assert cfg.after == ("a.service", "b.service", "c.service")  # a bare name is a service; duplicates dropped
    assert cfg.wants == ("y.service",)
    assert cfg.environment == (("A", "3"), ("B", "2"))  # later value replaces in place
    assert cfg.success_exit_status == {2} and cfg.success_signals == {signal.SIGUSR2}


def test_scalar_keys_last_assignment_wins_and_empty_resets_to_default():
    cfg = config_of(
        """
        [Service]
        ExecStart=/bin/true
        Restart=always
        Restart=on-failure
        RestartSec=1
        RestartSec=
        TimeoutSec=10
        TimeoutStopSec=20
        """
    )
    assert cfg.restart is RestartPolicy.ON_FAILURE
    assert cfg.restart_sec == 0.1
    assert cfg.timeout_start == 10.0 and cfg.timeout_stop == 20.0


def test_empty_exec_start_resets():
    cfg = config_of("[Service]\nExecStart=/bin/a\nExecStart=\nExecStart=/bin/b\n")
    assert cfg.exec_start == ("/bin/b",)


def test_exec_start_expands_environment_defined_later_in_the_file():
    cfg = config_of("[Service]\nExecStart=/bin/echo ${GREETING}\nEnvironment=GREETING=hi\n")
    assert cfg.exec_start == ("/bin/echo", "hi")


# --- time spans -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("0", 0.0),
        ("90", 90.0),
        ("2.5s", 2.5),
        ("100ms", 0.1),
        ("250msec", 0.25),
        ("20us", 20e-6),
        ("5µs", 5e-6),
        ("1min 30s", 90.0),
        ("1min30s", 90.0),
        ("1 min 30 sec", 90.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1hr 1minute 1second", 3661.0),
        ("1d", 86400.0),
        ("2 weeks", 1209600.0),
        ("1y", 31557600.0),
        (".5s", 0.5),
        ("  10s  ", 10.0),
        ("infinity", math.inf),
    ],
)
def test_parse_timespan(text, seconds):
    assert parse_timespan(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "   ", "abc", "-1", "5x", "12.34.56", "1s infinity", "5 mins", "1e3", "9" * 400])
def test_parse_timespan_rejects(text):
    with pytest.raises(ValueError, match="time span"):
        parse_timespan(text)


# --- ExecStart command lines ----------------------------------------------------------------------

ENV = {"ONE": "1", "WORDS": "a  b\tc", "EMPTY": ""}


@pytest.mark.parametrize(
    "value, argv, prefixes",
    [
        ("/bin/echo a  b", ["/bin/echo", "a", "b"], set()),
        ('/bin/echo "a b" \'c d\' ""', ["/bin/echo", "a b", "c d", ""], set()),
        ('/bin/echo "say \\"hi\\"" \'it\\\'s\'', ["/bin/echo", 'say "hi"', "it's"], set()),
        ('/bin/echo a"b c"d', ["/bin/echo", 'a"b', 'c"d'], set()),  # quotes only open at word start
        ("/bin/echo \\\\ \\n \\t \\s \\x41 \\101 \\u00e9 \\a", ["/bin/echo", "\\", "\n", "\t", " ", "A", "A", "é", "\a"], set()),
        ("/bin/echo \\;", ["/bin/echo", ";"], set()),
        ('/bin/echo ";"', ["/bin/echo", ";"], set()),
        ("/bin/echo a;b", ["/bin/echo", "a;b"], set()),
        ("/bin/echo $WORDS", ["/bin/echo", "a", "b", "c"], set()),
        ('/bin/echo "$WORDS"', ["/bin/echo", "a", "b", "c"], set()),  # quoting does not stop splitting (systemd)
        ("/bin/echo $UNSET $EMPTY end", ["/bin/echo", "end"], set()),
        ("/bin/echo ${WORDS}", ["/bin/echo", "a  b\tc"], set()),
        ("/bin/echo x${ONE}y ${UNSET}z", ["/bin/echo", "x1y", "z"], set()),
        ("/bin/echo ${UNSET:-dflt} ${ONE:+alt} ${EMPTY:+alt}", ["/bin/echo", "dflt", "alt", ""], set()),
        ("/bin/echo $$ $$ONE cost$5 $", ["/bin/echo", "$", "$ONE", "cost$5", "$"], set()),
        ("/bin/echo 100%% %n %N %p %i %t 5%", ["/bin/echo", "100%", "demo.service", "demo", "demo", "", "/run", "5%"], set()),
        ("-/bin/false", ["/bin/false"], {"-"}),
        (":/bin/echo $ONE ${ONE} $$", ["/bin/echo", "$ONE", "${ONE}", "$$"], {":"}),
        ("-:/bin/echo", ["/bin/echo"], {"-", ":"}),
        ('"-/bin/quoted prefix"', ["/bin/quoted prefix"], {"-"}),
        ("+/bin/true", ["/bin/true"], {"+"}),
        ("!!/bin/true", ["/bin/true"], {"!"}),
        ("@/bin/sleep sleeper 1", ["/bin/sleep", "sleeper", "1"], {"@"}),
        ("python3 -c pass", ["python3", "-c", "pass"], set()),  # bare names are kept for PATH lookup
        ("$ONE", ["$ONE"], set()),  # the executable itself is never expanded
    ],
)
def test_split_exec(value, argv, prefixes):
    assert split_exec(value, unit_name="demo.service", environment=ENV) == (argv, prefixes)


def test_split_exec_template_specifiers():
    argv, _ = split_exec("/bin/echo %n %N %p %i %I", unit_name="getty@tty1.service")
    assert argv == ["/bin/echo", "getty@tty1.service", "getty@tty1", "getty", "tty1", "tty1"]


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("", "empty command line"),
        ("   ", "empty command line"),
        ("/bin/a ; /bin/b", "multiple commands are not supported"),
        ("/bin/a ;", "multiple commands are not supported"),
        ('/bin/echo "a"b', "must be followed by whitespace"),
        ("/bin/echo 'open", "unterminated"),
        ("/bin/echo \\", "trailing backslash"),
        ("/bin/echo a\\ b", "invalid escape"),
        ("/bin/echo \\x0", "invalid escape"),
        ("/bin/echo \\x00", "not allowed"),
        ("/bin/echo \\000", "not allowed"),
        ("/bin/echo \\400", "not allowed"),
        ("/bin/echo \\ud800", "not allowed"),
        ("/bin/echo %Q", "unsupported specifier"),
        ("relative/bin", "neither an absolute path"),
        ("/usr/bin/", "directory"),
        ("--/bin/true", "given twice"),
        ("+!/bin/true", "cannot be combined"),
        ("@/bin/true", "'@' needs"),
        ("/bin/echo a\x00", "NUL"),
    ],
)
def test_split_exec_rejects(value, fragment):
    with pytest.raises(ValueError) as excinfo:
        split_exec(value)
    assert fragment in str(excinfo.value)


# --- property tests -------------------------------------------------------------------------------

_KNOWN_LINES = st.sampled_from(
    [
        "[Unit]", "[Service]", "[Install]", "[X-Ext]", "[Other]", "ExecStart=", "Environment=", "After=",
        "Type=", "Restart=", "TimeoutSec=", "KillSignal=", "SuccessExitStatus=", "WorkingDirectory=",
        "StandardOutput=", "SendSIGKILL=", "#", "", "\\",
    ]
)
_FRAGMENT = st.text(alphabet=st.sampled_from(list("ab/ \t\"'\\$%{}:-@+!;=[]#0129sSIGmin\x00é\r\n")), max_size=12)
_UNIT_LIKE_TEXT = st.lists(st.tuples(_KNOWN_LINES, _FRAGMENT).map("".join), max_size=12).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=200), _UNIT_LIKE_TEXT))
def test_parse_unit_never_raises(text):
    result = parse_unit(text, PATH)
    assert isinstance(result, LoadResult)
    assert (result.config is None) == (result.error is not None)


_PRINTABLE_WORD = st.text(alphabet=st.characters(codec="utf-8").filter(str.isprintable), max_size=15)


def _quote(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$").replace("%", "%%")
    return f'"{escaped}"'


@settings(max_examples=150, deadline=None)
@given(st.lists(_PRINTABLE_WORD, max_size=6))
def test_split_exec_round_trips_quoted_words(words):
    command = " ".join(["/bin/prog", *map(_quote, words)])
    assert split_exec(command, unit_name="demo.service", environment={"A": "x"}) == (["/bin/prog", *words], set())


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_parse_timespan_only_raises_value_error(text):
    try:
        assert parse_timespan(text) >= 0
    except ValueError:
        pass


# --- files and directories ------------------------------------------------------------------------


def test_load_unit_dir_picks_only_service_files(tmp_path):
    (tmp_path / "b.service").write_text("[Service]\nExecStart=/bin/b\n")
    (tmp_path / "a.service").write_text("[Service]\nExecStart=/bin/a\nBogus=1\n")
    (tmp_path / ".hidden.service").write_text("[Service]\nExecStart=/bin/hidden\n")
    (tmp_path / "notes.txt").write_text("not a unit")
    (tmp_path / "a.service.bak").write_text("[Service]\nExecStart=/bin/old\n")
    (tmp_path / "sub.service").mkdir()
    (tmp_path / "sub.service" / "c.service").write_text("[Service]\nExecStart=/bin/c\n")
    (tmp_path / "garbage.service").write_bytes(b"[Service]\nExecStart=/bin/x\n\xff\xfe\x00\x81binary")
    (tmp_path / "broken.service").write_text("[Service]\nno equals sign\n")
    (tmp_path / "dangling.service").symlink_to(tmp_path / "missing-target")

    results = load_unit_dir(str(tmp_path))

    assert list(results) == ["a.service", "b.service", "broken.service", "dangling.service", "garbage.service"]
    assert results["a.service"].config.exec_start == ("/bin/a",)
    assert results["a.service"].path == str(tmp_path / "a.service")
    assert len(results["a.service"].warnings) == 1
    assert results["b.service"].config.name == "b.service"
    for name, line in [("garbage.service", 3), ("broken.service", 2), ("dangling.service", 0)]:
        assert results[name].config is None and results[name].error.line == line, name
    assert "UTF-8" in results["garbage.service"].error.message


def test_load_unit_errors_instead_of_raising(tmp_path):
    missing = load_unit(str(tmp_path / "missing.service"))
    assert missing.config is None and missing.name == "missing.service"
    assert "Failed to read unit file" in missing.error.message
    assert load_unit(str(tmp_path)).config is None  # a directory
    nul = tmp_path / "nul.service"
    nul.write_bytes(b"[Service]\nExecStart=/bin/true\x00\n")
    assert "NUL" in load_unit(str(nul)).error.message


def test_load_unit_does_not_hang_on_a_fifo(tmp_path):
    fifo = tmp_path / "fifo.service"
    os.mkfifo(fifo)
    result = load_unit(str(fifo))
    assert result.config is None and "not a regular file" in result.error.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_load_unit_unreadable_file(tmp_path):
    unit = tmp_path / "secret.service"
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    unit.chmod(0)
    assert load_unit(str(unit)).error.message.startswith("Failed to read unit file")

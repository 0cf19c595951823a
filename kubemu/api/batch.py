"""Defaulting and validation of Job and CronJob (batch/v1), with objects.py's contract
(DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind), and the Job strategy's selector generation:

    default_job(obj) / default_cronjob(obj)            -> a new, defaulted object
    validate_job(obj, strict=True) / validate_cronjob  -> [FieldError, ...]
    validate_job_update(old, new)
    prepare_job_for_create(job)                        -> the Job the apiserver stores

As kube-apiserver has them (pkg/apis/batch/v1 defaults, pkg/apis/batch/validation,
pkg/registry/batch/job/strategy.go):

* Job: parallelism 1 (completions 1 too when neither is set), backoffLimit 6 (MaxInt32 with
  backoffLimitPerIndex), completionMode NonIndexed, suspend false, podReplacementPolicy
  TerminatingOrFailed (Failed with a podFailurePolicy), manualSelector unset. The template's
  restartPolicy must be OnFailure or Never (Never with a podFailurePolicy); Indexed needs
  completions; podFailurePolicy rules (FailJob, Ignore, Count, FailIndex) on exit codes or pod
  conditions. On create the apiserver adds the Job's uid to the selector and labels the
  template with what it lacks (unless manualSelector); a user's selector or label that is not
  the generated one is then refused; on update the selector, template (but the scheduling
  directives of a suspended Job that never started), completionMode, podFailurePolicy,
  backoffLimitPerIndex, managedBy and successPolicy are immutable, completions too (but for
  an Indexed Job, changed with parallelism).
* CronJob: concurrencyPolicy Allow (Forbid, Replace), suspend false, successfulJobsHistoryLimit
  3, failedJobsHistoryLimit 1; the schedule parsed as the controller parses it (kubemu/cron.py),
  no TZ= in it, an IANA timeZone, startingDeadlineSeconds >= 0, the jobTemplate's spec
  validated as a Job's (its selector is always generated), a name of at most 52 characters
  (the controller appends an 11-character suffix).
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from .. import cron
from .fielderrors import (FieldError, child, duplicate, index, invalid, not_supported, required,
                          too_long)
from .meta import (TYPES, Checker, check_label_selector, register, selector_matches, table)
from .pod import (_absent, _fill, _is_int, dns1123_label_errors, dns1123_subdomain_errors,
                  field_types, qualified_name_errors)

MAX_INT32 = 2 ** 31 - 1
JOB_SPEC_DEFAULTS = {"backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False}
CRONJOB_SPEC_DEFAULTS = {"concurrencyPolicy": "Allow", "suspend": False,
                         "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1}
COMPLETION_MODES = ("NonIndexed", "Indexed")
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")  # sets.List order: sorted
EXIT_CODE_OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("False", "True", "Unknown")
POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
RESTART_POLICIES = ("OnFailure", "Never")
MAX_PARALLELISM_INDEXED = 100000
MAX_FAILED_INDEXES = 100000
MAX_POD_FAILURE_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_CONDITION_PATTERNS = 20
MAX_MANAGED_BY = 63
CRONJOB_NAME_MAX = 52  # DNS1035LabelMaxLength (63) - 11: the controller's "-<minutes>" suffix

# The labels the Job strategy generates (batch.ControllerUidLabel, JobNameLabel and the legacy ones).
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"

_META = "apiVersion:string kind:string metadata:ObjectMeta"

register(
    Job=table("apiVersion kind metadata spec status", types=f"{_META} spec:JobSpec status:JobStatus"),
    JobSpec=table("""parallelism completions activeDeadlineSeconds podFailurePolicy successPolicy
                  backoffLimit backoffLimitPerIndex maxFailedIndexes selector manualSelector
                  template ttlSecondsAfterFinished completionMode suspend podReplacementPolicy
                  managedBy""",
                  {"manualSelector": "boolean", "suspend": "boolean", "managedBy": "string"},
                  types="""parallelism:integer completions:integer
                  activeDeadlineSeconds:integer podFailurePolicy:PodFailurePolicy
                  successPolicy:SuccessPolicy backoffLimit:integer
                  backoffLimitPerIndex:integer maxFailedIndexes:integer
                  selector:LabelSelector manualSelector:boolean template:PodTemplateSpec
                  ttlSecondsAfterFinished:integer completionMode:string suspend:boolean
                  podReplacementPolicy:string managedBy:string"""),
    PodFailurePolicy=table("rules", {"rules": "list"}, types="rules:[]PodFailurePolicyRule"),
    PodFailurePolicyRule=table("action onExitCodes onPodConditions", {"onPodConditions": "list"},
                               types="""action:string
                               onExitCodes:PodFailurePolicyOnExitCodesRequirement
                               onPodConditions:[]PodFailurePolicyOnPodConditionsPattern"""),
    PodFailurePolicyOnExitCodesRequirement=table(
        "containerName operator values", {"containerName": "string", "values": "list"},
        types="containerName:string operator:string values:[]integer"),
    PodFailurePolicyOnPodConditionsPattern=table("type status", {"type": "string"},
                                                 types="type:string status:string"),
    SuccessPolicy=table("rules", {"rules": "list"}, types="rules:[]SuccessPolicyRule"),
    SuccessPolicyRule=table("succeededIndexes succeededCount", {"succeededIndexes": "string"},
                            types="succeededIndexes:string succeededCount:integer"),
    JobStatus=table("""conditions startTime completionTime active succeeded failed terminating
                    completedIndexes failedIndexes uncountedTerminatedPods ready""",
                    {"conditions": "list", "completedIndexes": "string",
                     "failedIndexes": "string", "uncountedTerminatedPods": "object"},
                    types="""conditions:[]JobCondition startTime:Time completionTime:Time
                    active:integer succeeded:integer failed:integer terminating:integer
                    completedIndexes:string failedIndexes:string
                    uncountedTerminatedPods:UncountedTerminatedPods ready:integer"""),

    CronJob=table("apiVersion kind metadata spec status",
                  types=f"{_META} spec:CronJobSpec status:CronJobStatus"),
    CronJobSpec=table("""schedule timeZone startingDeadlineSeconds concurrencyPolicy suspend
                      jobTemplate successfulJobsHistoryLimit failedJobsHistoryLimit""",
                      {"schedule": "string", "timeZone": "string", "suspend": "boolean"},
                      types="""schedule:string timeZone:string startingDeadlineSeconds:integer
                      concurrencyPolicy:string suspend:boolean jobTemplate:JobTemplateSpec
                      successfulJobsHistoryLimit:integer failedJobsHistoryLimit:integer"""),
    JobTemplateSpec=table("metadata spec", types="metadata:ObjectMeta spec:JobSpec"),
    CronJobStatus=table("active lastScheduleTime lastSuccessfulTime", {"active": "list"},
                        types="""active:[]ObjectReference lastScheduleTime:Time
                        lastSuccessfulTime:Time"""),
)

TYPES.update({kind: field_types(text) for kind, text in {
    "JobCondition": """type:string status:string lastProbeTime:Time lastTransitionTime:Time
        reason:string message:string""",
    "UncountedTerminatedPods": "succeeded:[]string failed:[]string",
}.items()})


def _frame():
    from . import objects  # objects.py imports this module for its tables
    return objects


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


# --- defaults -----------------------------------------------------------------------------------

def _default_job_spec(spec: dict) -> None:
    """SetDefaults_Job's spec part."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _fill(spec, {"parallelism": 1})
    if spec.get("backoffLimit") is None and spec.get("backoffLimitPerIndex") is not None:
        spec["backoffLimit"] = MAX_INT32
    _fill(spec, JOB_SPEC_DEFAULTS)
    _fill(spec, {"podReplacementPolicy": "Failed" if spec.get("podFailurePolicy") is not None
                 else "TerminatingOrFailed"})
    _frame()._default_template(spec)


def default_job(obj: Any) -> Any:
    """SetDefaults_Job: see the module's docstring; a Job without labels takes its template's."""
    objects = _frame()

    def fill(job: dict) -> None:
        spec = objects._sub(job, "spec")
        if spec is None:
            return
        meta = job["metadata"]
        labels = _dict(_dict(spec.get("template")).get("metadata")).get("labels")
        if isinstance(meta, dict) and not meta.get("labels") and isinstance(labels, dict) and labels:
            meta["labels"] = dict(labels)
        _default_job_spec(spec)
    return objects._defaulted(obj, fill, namespaced=True)


def default_cronjob(obj: Any) -> Any:
    """SetDefaults_CronJob: concurrencyPolicy Allow, suspend false, history limits 3 and 1; the
    job template's pod spec as a Pod's (its Job spec is defaulted when the Job is made)."""
    objects = _frame()

    def fill(cj: dict) -> None:
        spec = objects._sub(cj, "spec")
        if spec is None:
            return
        _fill(spec, CRONJOB_SPEC_DEFAULTS)
        job_spec = _dict(spec.get("jobTemplate")).get("spec")
        if isinstance(job_spec, dict):
            objects._default_template(job_spec)
    return objects._defaulted(obj, fill, namespaced=True)


# --- the Job strategy's selector generation -----------------------------------------------------

def prepare_job_for_create(job: Any) -> Any:
    """The Job strategy's PrepareForCreate, once the uid is set: no status, and unless
    spec.manualSelector is true, generateSelector: the template labelled with the controller-uid
    and job-name labels (new and legacy) it lacks, and `batch.kubernetes.io/controller-uid:
    <uid>` added to the selector's matchLabels unless there. A label or selector the user set
    is kept: validation rejects one that conflicts ("`selector` not auto-generated")."""
    if not isinstance(job, dict):
        return job
    out = {k: v for k, v in job.items() if k != "status"}
    spec, meta = out.get("spec"), _dict(out.get("metadata"))
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return out
    uid, name = meta.get("uid"), meta.get("name")
    if not isinstance(uid, str) or not uid:
        return out
    spec = out["spec"] = copy.deepcopy(spec)
    if spec.get("selector") is None:
        spec["selector"] = {}
    selector = spec["selector"]
    if isinstance(selector, dict):
        if selector.get("matchLabels") is None:
            selector["matchLabels"] = {}
        if isinstance(selector["matchLabels"], dict):
            selector["matchLabels"].setdefault(CONTROLLER_UID_LABEL, uid)
    if spec.get("template") is None:
        spec["template"] = {}
    template = spec["template"]
    if not isinstance(template, dict):
        return out
    if template.get("metadata") is None:
        template["metadata"] = {}
    tmeta = template["metadata"]
    if not isinstance(tmeta, dict):
        return out
    if tmeta.get("labels") is None:
        tmeta["labels"] = {}
    labels = tmeta["labels"]
    if isinstance(labels, dict):
        for key, value in ((LEGACY_JOB_NAME_LABEL, name), (JOB_NAME_LABEL, name),
                           (LEGACY_CONTROLLER_UID_LABEL, uid), (CONTROLLER_UID_LABEL, uid)):
            labels.setdefault(key, value)
    return out


# --- Job ----------------------------------------------------------------------------------------

def _job_spec(c: Checker, spec: dict, path: str) -> None:
    """validateJobSpec: what a Job's and a CronJob's job template's specs share."""
    for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                  "ttlSecondsAfterFinished", "backoffLimitPerIndex", "maxFailedIndexes"):
        c.nonnegative(spec.get(field), child(path, field))
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        c.add(required(child(path, "backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
    managed = spec.get("managedBy")
    if isinstance(managed, str):
        _managed_by(c, managed, child(path, "managedBy"))
    mode = spec.get("completionMode")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    max_failed = spec.get("maxFailedIndexes")
    if mode is not None and mode not in COMPLETION_MODES:
        c.add(not_supported(child(path, "completionMode"), mode, COMPLETION_MODES))
    if mode == "Indexed":
        if completions is None:
            c.add(required(child(path, "completions"), "when completion mode is Indexed"))
        if _is_int(parallelism) and parallelism > MAX_PARALLELISM_INDEXED:
            c.invalid(child(path, "parallelism"), parallelism, "must be less than or equal to "
                      f"{MAX_PARALLELISM_INDEXED} when completion mode is Indexed")
        if _is_int(completions) and _is_int(max_failed) and max_failed > completions:
            c.invalid(child(path, "maxFailedIndexes"), max_failed,
                      "must be less than or equal to completions")
        if _is_int(max_failed) and max_failed > MAX_FAILED_INDEXES:
            c.invalid(child(path, "maxFailedIndexes"), max_failed,
                      f"must be less than or equal to {MAX_FAILED_INDEXES}")
    elif mode in (None, "NonIndexed"):
        for field in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if _is_int(spec.get(field)):
                c.invalid(child(path, field), spec[field], "requires indexed completion mode")
    template = spec.get("template") if spec.get("template") is not None else {}
    pod_spec = _dict(_dict(template).get("spec"))
    failure_policy = c.obj(spec.get("podFailurePolicy"), child(path, "podFailurePolicy"),
                           "PodFailurePolicy")
    if failure_policy is not None:
        _pod_failure_policy(c, failure_policy, spec, pod_spec, child(path, "podFailurePolicy"))
    success = c.obj(spec.get("successPolicy"), child(path, "successPolicy"), "SuccessPolicy")
    if success is not None and mode != "Indexed":
        c.invalid(child(path, "successPolicy"), success, "requires indexed completion mode")
    elif success is not None:
        _success_policy(c, success, completions, child(path, "successPolicy"))
    replacement = spec.get("podReplacementPolicy")
    r_path = child(path, "podReplacementPolicy")
    if replacement is not None and failure_policy is not None and replacement != "Failed":
        c.add(not_supported(r_path, replacement, ("Failed",)))
    elif replacement is not None and failure_policy is None and replacement not in POD_REPLACEMENT_POLICIES:
        c.add(not_supported(r_path, replacement, POD_REPLACEMENT_POLICIES))
    t_path = child(path, "template")
    c.errors.extend(_frame().pod.validate_pod_template(template, t_path, strict=c.strict))
    policy = pod_spec.get("restartPolicy")
    rp_path = child(t_path, "spec.restartPolicy")
    if policy in (None, "", "Always"):
        c.add(required(rp_path, 'valid values: "OnFailure", "Never"'))
    elif policy not in RESTART_POLICIES:
        c.add(not_supported(rp_path, policy, RESTART_POLICIES))
    elif failure_policy is not None and policy != "Never":
        c.invalid(rp_path, policy, 'only "Never" is supported when podFailurePolicy is specified')


def _managed_by(c: Checker, value: str, path: str) -> None:
    """IsDomainPrefixedPath and the length limit."""
    domain, slash, rest = value.partition("/")
    if not slash or not rest:
        c.invalid(path, value, "must be a domain-prefixed path (such as \"acme.io/foo\")")
    else:
        for msg in dns1123_subdomain_errors(domain):
            c.invalid(path, domain, msg)
    if len(value) > MAX_MANAGED_BY:
        c.add(too_long(path, MAX_MANAGED_BY))


def _go_list(values: tuple[str, ...]) -> str:
    """fmt's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _pod_failure_policy(c: Checker, policy: dict, spec: dict, pod_spec: dict, path: str) -> None:
    """validatePodFailurePolicy: at most 20 rules; each an action and exactly one of
    onExitCodes and onPodConditions."""
    rules_path = child(path, "rules")
    rules = c.array(policy.get("rules"), rules_path) or []
    if len(rules) > MAX_POD_FAILURE_RULES:
        c.add(_too_many(rules_path, len(rules), MAX_POD_FAILURE_RULES))
    names = {ctr["name"] for field in ("containers", "initContainers")
             for ctr in (pod_spec.get(field) if isinstance(pod_spec.get(field), list) else [])
             if isinstance(ctr, dict) and isinstance(ctr.get("name"), str)}
    for r_path, rule in c.each_obj(rules, rules_path, "PodFailurePolicyRule"):
        action = rule.get("action")
        a_path = child(r_path, "action")
        if _absent(action):
            c.add(required(a_path, f"valid values: {_go_list(POD_FAILURE_ACTIONS)}"))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                c.invalid(a_path, action, "requires the backoffLimitPerIndex to be set")
        elif action not in POD_FAILURE_ACTIONS:
            c.add(not_supported(a_path, action, POD_FAILURE_ACTIONS))
        exit_codes = c.obj(rule.get("onExitCodes"), child(r_path, "onExitCodes"),
                           "PodFailurePolicyOnExitCodesRequirement")
        if exit_codes is not None:
            _on_exit_codes(c, exit_codes, child(r_path, "onExitCodes"), names)
        patterns = c.array(rule.get("onPodConditions"), child(r_path, "onPodConditions")) or []
        if patterns:
            _on_pod_conditions(c, patterns, child(r_path, "onPodConditions"))
        if exit_codes is not None and patterns:
            c.add(FieldError(r_path, "Invalid value",
                             "specifying both OnExitCodes and OnPodConditions is not supported"))
        if exit_codes is None and not patterns:
            c.add(FieldError(r_path, "Invalid value",
                             "specifying one of OnExitCodes and OnPodConditions is required"))


def _too_many(path: str, actual: int, limit: int) -> FieldError:
    """field.TooMany."""
    return FieldError(path, "Too many", f"must have at most {limit} items", actual)


def _on_exit_codes(c: Checker, req: dict, path: str, names: set) -> None:
    op = req.get("operator")
    op_path = child(path, "operator")
    if _absent(op):
        c.add(required(op_path, f"valid values: {_go_list(EXIT_CODE_OPERATORS)}"))
    elif op not in EXIT_CODE_OPERATORS:
        c.add(not_supported(op_path, op, EXIT_CODE_OPERATORS))
    container = req.get("containerName")
    if isinstance(container, str) and container not in names:
        c.invalid(child(path, "containerName"), container,
                  "must be one of the container or initContainer names in the pod template")
    v_path = child(path, "values")
    values = c.array(req.get("values"), v_path)
    if not values:
        c.invalid(v_path, values or [], "at least one value is required")
        return
    if len(values) > MAX_EXIT_CODE_VALUES:
        c.add(_too_many(v_path, len(values), MAX_EXIT_CODE_VALUES))
    seen: set[int] = set()
    ordered = True
    previous = None
    for i, value in enumerate(values):
        value = c.integer(value, index(v_path, i))
        if value is None:
            continue
        if op == "In" and value == 0:
            c.invalid(index(v_path, i), value, "must not be 0 for the In operator")
        if value in seen:
            c.add(duplicate(index(v_path, i), value))
        seen.add(value)
        if previous is not None and previous > value:
            ordered = False
        previous = value
    if not ordered:
        c.invalid(v_path, values, "must be ordered")


def _on_pod_conditions(c: Checker, patterns: list, path: str) -> None:
    if len(patterns) > MAX_CONDITION_PATTERNS:
        c.add(_too_many(path, len(patterns), MAX_CONDITION_PATTERNS))
    for p_path, pattern in c.each_obj(patterns, path, "PodFailurePolicyOnPodConditionsPattern"):
        ctype = pattern.get("type")
        t_path = child(p_path, "type")
        if _absent(ctype):
            c.add(required(t_path, ""))
        elif isinstance(ctype, str):
            for msg in qualified_name_errors(ctype):
                c.invalid(t_path, ctype, msg)
        status = pattern.get("status")
        s_path = child(p_path, "status")
        if _absent(status):
            c.add(required(s_path, f"valid values: {_go_list(CONDITION_STATUSES)}"))
        elif status not in CONDITION_STATUSES:
            c.add(not_supported(s_path, status, CONDITION_STATUSES))


def _success_policy(c: Checker, policy: dict, completions: Any, path: str) -> None:
    """validateSuccessPolicy (the indexes' format is left to the controller)."""
    rules_path = child(path, "rules")
    rules = c.array(policy.get("rules"), rules_path) or []
    if not rules:
        c.add(required(rules_path, "at least one rules must be specified when the successPolicy "
                       "is specified"))
    for r_path, rule in c.each_obj(rules, rules_path, "SuccessPolicyRule"):
        if rule.get("succeededCount") is None and rule.get("succeededIndexes") is None:
            c.add(required(r_path, "at least one of succeededCount or succeededIndexes must be "
                           "specified"))
        count = c.nonnegative(rule.get("succeededCount"), child(r_path, "succeededCount"))
        if count is not None and _is_int(completions) and count > completions:
            c.invalid(child(r_path, "succeededCount"), count, f"must be less than or equal to "
                      f"{completions} (the number of specified completions)")


def _job_status(c: Checker, value: Any) -> None:
    status = c.obj(value, "status", "JobStatus")
    if status is None:
        return
    for field in ("active", "succeeded", "failed", "ready", "terminating"):
        c.nonnegative(status.get(field), child("status", field))
    for field in ("startTime", "completionTime"):
        c.timestamp(status.get(field), child("status", field))


def validate_job(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateJob: metadata, the generated selector's labels, the spec, the Indexed pods'
    hostnames, the status's counters."""
    objects = _frame()

    def body(c: Checker, job: dict) -> None:
        meta = _dict(job.get("metadata"))
        spec = c.obj(job.get("spec"), "spec", "JobSpec")
        spec = spec if spec is not None else {}
        _generated_selector(c, meta, spec)
        _job_spec(c, spec, "spec")
        sel_path = "spec.selector"
        if spec.get("selector") is None:
            c.add(required(sel_path))
        else:
            selector = check_label_selector(c, spec["selector"], sel_path)
            labels = _dict(_dict(spec.get("template")).get("metadata")).get("labels")
            if selector is not None and not selector_matches(selector, labels):
                c.invalid("spec.template.metadata.labels", labels if labels is not None else {},
                          "`selector` does not match template `labels`")
        completions, name = spec.get("completions"), meta.get("name")
        if spec.get("completionMode") == "Indexed" and _is_int(completions) and completions > 0 \
                and isinstance(name, str) and name:
            hostname = f"{name}-{completions - 1}"
            if dns1123_label_errors(hostname):
                c.invalid("metadata.name", name, "will not able to create pod with invalid DNS "
                          f"label: {hostname}")
        _job_status(c, job.get("status"))
    return objects._validate(obj, "Job", strict, body)


def _generated_selector(c: Checker, meta: dict, spec: dict) -> None:
    """validateGeneratedSelector: unless manualSelector, the template carries the generated
    labels and the selector selects them."""
    if spec.get("manualSelector") is True or not isinstance(spec.get("selector"), dict):
        return
    uid, name = meta.get("uid"), meta.get("name")
    if _absent(uid):
        c.add(required("metadata.uid"))
        return
    labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    expected = {LEGACY_CONTROLLER_UID_LABEL: uid, LEGACY_JOB_NAME_LABEL: name,
                CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name}
    for key, want in expected.items():  # ValidateHasLabel
        if key not in labels:
            c.add(required(f"spec.template.metadata.labels[{key}]", str(want)))
        elif labels[key] != want:
            c.invalid(f"spec.template.metadata.labels[{key}]", dict(sorted(labels.items())),
                      f"must be '{want}'")
    c_sel = Checker(False)
    selector = check_label_selector(c_sel, spec["selector"], "spec.selector")
    if selector is not None and not selector_matches(selector, {CONTROLLER_UID_LABEL: uid}):
        c.invalid("spec.selector", spec["selector"], "`selector` not auto-generated")


# The template fields a suspended Job that never started may change (JobMutableNodeSchedulingDirectives).
_SCHEDULING_SPEC = ("nodeSelector", "tolerations", "schedulingGates")


def _scheduling_free(template: Any) -> Any:
    """The template without what may change while suspended and never started: node affinity,
    nodeSelector, tolerations, scheduling gates, labels and annotations."""
    if not isinstance(template, dict):
        return template
    out = copy.deepcopy(template)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("labels", None)
        meta.pop("annotations", None)
    spec = out.get("spec")
    if isinstance(spec, dict):
        for field in _SCHEDULING_SPEC:
            spec.pop(field, None)
        affinity = spec.get("affinity")
        if isinstance(affinity, dict):
            affinity.pop("nodeAffinity", None)
            if not affinity:
                spec.pop("affinity")
    return out


def validate_job_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateJobSpecUpdate's immutable fields (see the module's docstring)."""
    before, after = _dict(_dict(old).get("spec")), _dict(_dict(new).get("spec"))
    errors: list[FieldError] = []

    def immutable(field: str, a: Any = None, b: Any = None, changed: bool | None = None) -> None:
        a = before.get(field) if a is None else a
        b = after.get(field) if b is None else b
        if (a != b) if changed is None else changed:
            errors.append(invalid(child("spec", field), after.get(field), "field is immutable"))

    indexed = after.get("completionMode") == "Indexed"
    if not indexed:
        immutable("completions")
    elif before.get("completions") != after.get("completions") and _is_int(after.get("completions")) \
            and after.get("completions") != after.get("parallelism"):
        errors.append(invalid("spec.completions", after["completions"],
                              "can only be modified in tandem with spec.parallelism"))
    immutable("selector")
    suspended = before.get("suspend") is True
    not_started = _dict(_dict(old).get("status")).get("startTime") is None
    old_t, new_t = before.get("template"), after.get("template")
    if suspended and not_started:
        immutable("template", changed=_scheduling_free(old_t) != _scheduling_free(new_t))
    else:
        immutable("template", changed=old_t != new_t)
    for field in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy",
                  "successPolicy"):
        immutable(field)
    return errors


# --- CronJob ------------------------------------------------------------------------------------

def _cronjob_spec(c: Checker, spec: dict) -> None:
    """validateCronJobSpec."""
    schedule = spec.get("schedule")
    if _absent(schedule):
        c.add(required("spec.schedule"))
    elif isinstance(schedule, str):
        try:
            cron.parse(schedule, None)
        except cron.CronError as err:
            if err.field == "schedule":
                c.invalid("spec.schedule", schedule, err.message)
        if "TZ" in schedule:
            c.invalid("spec.schedule", schedule,
                      "cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    c.nonnegative(spec.get("startingDeadlineSeconds"), "spec.startingDeadlineSeconds")
    time_zone = spec.get("timeZone")
    if isinstance(time_zone, str):
        try:
            cron.check_time_zone(time_zone)
        except cron.CronError as err:
            c.invalid("spec.timeZone", time_zone, err.message)
    policy = spec.get("concurrencyPolicy")
    if policy == "":
        c.add(required("spec.concurrencyPolicy"))
    elif policy is not None and policy not in CONCURRENCY_POLICIES:
        c.add(not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    job_template = c.obj(spec.get("jobTemplate"), "spec.jobTemplate", "JobTemplateSpec") or {}
    job_spec = c.obj(job_template.get("spec"), "spec.jobTemplate.spec", "JobSpec") or {}
    _job_spec(c, job_spec, "spec.jobTemplate.spec")
    if job_spec.get("selector") is not None:
        c.invalid("spec.jobTemplate.spec.selector", job_spec["selector"],
                  "`selector` will be auto-generated")
    if job_spec.get("manualSelector") is True:
        c.add(not_supported("spec.jobTemplate.spec.manualSelector", True, ("nil", "false")))
    for field in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        c.nonnegative(spec.get(field), child("spec", field))


def validate_cronjob(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateCronJobCreate: the spec, and a name of at most 52 characters. (Upstream's update
    relaxes the TZ= and name rules for CronJobs stored before them; kubemu stores none such.)"""
    def body(c: Checker, cj: dict) -> None:
        spec = c.obj(cj.get("spec"), "spec", "CronJobSpec")
        _cronjob_spec(c, spec if spec is not None else {})
        status = c.obj(cj.get("status"), "status", "CronJobStatus")
        if status is not None:
            for field in ("lastScheduleTime", "lastSuccessfulTime"):
                c.timestamp(status.get(field), child("status", field))
        name = _dict(cj.get("metadata")).get("name")
        if isinstance(name, str) and len(name) > CRONJOB_NAME_MAX:
            c.invalid("metadata.name", name, f"must be no more than {CRONJOB_NAME_MAX} characters")
    return _frame()._validate(obj, "CronJob", strict, body)


DEFAULTERS: dict[str, Callable[[Any], Any]] = {"Job": default_job, "CronJob": default_cronjob}
VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {"Job": validate_job,
                                                          "CronJob": validate_cronjob}
UPDATE_VALIDATORS: dict[str, Callable[[Any, Any], list[FieldError]]] = {"Job": validate_job_update}

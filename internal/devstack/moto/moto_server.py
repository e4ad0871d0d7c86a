"""Start moto's server with Stratus's workarounds for moto 5.2.1.

docs/architecture.md § Testing stand-ins: turn on real Step Functions execution, and
patch StateMachine.__deepcopy__ so that every StartExecution after the first
does not fail with a 500 (upstream moto issue 10077): the copy shares the
backend and leaves the live executions behind; keep SendTaskFailure's cause;
give a retried callback state a new task token;
serve DynamoDB requests one at a time; check the signature of a presigned S3 request that signs its
Content-Length (see below); and give moto's CloudFormation what a stack of the
SAM-transformed template.yaml needs (models for the nine resource types moto
lacks, and the fixes listed at "CloudFormation" below; README "What dev aws
emulates").

Usage: python3 moto_server.py -H 127.0.0.1 -p PORT
"""
import copy
import sys

from moto.core import config as moto_config

moto_config.default_user_config["stepfunctions"]["execute_state_machine"] = True

from moto.stepfunctions.models import StateMachine  # noqa: E402


def _deepcopy(self, memo):
    cls = self.__class__
    new = cls.__new__(cls)
    memo[id(self)] = new
    for key, value in self.__dict__.items():
        if key == "backend":
            setattr(new, key, value)
        elif key == "executions":
            setattr(new, key, [])
        else:
            setattr(new, key, copy.deepcopy(value, memo))
    return new


StateMachine.__deepcopy__ = _deepcopy

# moto 5.2.1's SendTaskFailure drops the cause (its response handler hands
# the backend the error only), so a Catch sees {"Error": ..., "Cause": null}.
# Step Functions keeps it, and a compiled "<node>.park" state reads the
# wait from the cause of stratus.Blocked: the cause is passed on.
from moto.core.responses import EmptyResult  # noqa: E402
from moto.stepfunctions.responses import StepFunctionResponse  # noqa: E402


def _send_task_failure(self):
    self.stepfunction_backend.send_task_failure(
        self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
    )
    return EmptyResult()


StepFunctionResponse.send_task_failure = _send_task_failure

# moto 5.2.1 retries a .waitForTaskToken state with the task token of its
# first try, whose callback endpoint keeps that try's failure: the retry
# fails again at once with it, whatever the worker sends. Step Functions
# gives every try its own token ($$.Task.Token), so a retried callback
# state gets a new one here before it runs again.
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState  # noqa: E402
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition  # noqa: E402

_evaluate_with_timeout = ExecutionState._evaluate_with_timeout


def _evaluate_with_new_token(self, env):
    resource = getattr(self, "resource", None)
    if (
        getattr(resource, "condition", None) == ResourceCondition.WaitForTaskToken
        and env.states.context_object.context_object_data["State"].get("RetryCount", 0) > 0
    ):
        env.callback_pool_manager.add(env.states.context_object.update_task_token())
    return _evaluate_with_timeout(self, env)


ExecutionState._evaluate_with_timeout = _evaluate_with_new_token

# moto 5.2.1's DynamoDB is not safe under concurrent requests: a conditional
# write checks, then writes, without a lock, and a cancelled transaction
# restores a deep copy of the whole table over writes made meanwhile. Real
# DynamoDB makes each request atomic, which is all Stratus relies on, so
# DynamoDB requests are served one at a time.
import threading  # noqa: E402

from moto.dynamodb.responses import DynamoHandler  # noqa: E402

_dynamodb_lock = threading.Lock()
_call_action = DynamoHandler.call_action


def _locked_call_action(self):
    with _dynamodb_lock:
        return _call_action(self)


DynamoHandler.call_action = _locked_call_action

# Started with -p 0, the server binds a free port itself; moto's Step
# Functions interpreter calls the other services back at localhost:$MOTO_PORT,
# so MOTO_PORT must name the port actually bound, not 0.
import os  # noqa: E402

import werkzeug.serving  # noqa: E402

_server_init = werkzeug.serving.BaseWSGIServer.__init__


def _server_init_with_port(self, *args, **kwargs):
    _server_init(self, *args, **kwargs)
    os.environ["MOTO_PORT"] = str(self.server_address[1])


werkzeug.serving.BaseWSGIServer.__init__ = _server_init_with_port

# S3 refuses a presigned request whose signature does not match what
# arrives; moto 5.2.1 checks no presigned signature at all. A URL that signs
# its Content-Length (X-Amz-SignedHeaders holds content-length: the sink's
# PresignPutSize, how a worker uploads a body or a step bundle) must be
# refused for a body of any other length, as S3 does
# (docs/security.md § Upload size limits), so such a request signed with
# the stand-in's own credential (AWS_ACCESS_KEY_ID, whose secret this
# process knows) has its Signature Version 4 query signature checked here:
# 403 SignatureDoesNotMatch, nothing stored. Other requests are served as
# moto serves them.
import hashlib  # noqa: E402
import hmac  # noqa: E402
import urllib.parse  # noqa: E402

from moto.moto_server.werkzeug_app import DomainDispatcherApplication  # noqa: E402

_dispatch = DomainDispatcherApplication.__call__


def _sigv4_quote(s):
    return urllib.parse.quote(s, safe="-_.~")


def _presigned_length_mismatch(environ):
    """True when environ is a presigned request signing content-length,
    made with the stand-in's credential, whose signature does not match."""
    qs = environ.get("QUERY_STRING", "")
    if "X-Amz-Signature=" not in qs or "content-length" not in qs:
        return False
    pairs = urllib.parse.parse_qsl(qs, keep_blank_values=True)
    q = dict(pairs)
    signed = q.get("X-Amz-SignedHeaders", "").split(";")
    cred = q.get("X-Amz-Credential", "").split("/")
    if "content-length" not in signed or len(cred) != 5:
        return False
    if cred[0] != os.environ.get("AWS_ACCESS_KEY_ID", "test"):
        return False
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "test")
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
    path = raw.split("?", 1)[0]
    query = "&".join(
        _sigv4_quote(k) + "=" + _sigv4_quote(v)
        for k, v in sorted(pairs)
        if k != "X-Amz-Signature"
    )
    headers = ""
    for h in signed:
        if h == "host":
            v = environ.get("HTTP_HOST", "")
        elif h == "content-length":
            v = environ.get("CONTENT_LENGTH", "")
        elif h == "content-type":
            v = environ.get("CONTENT_TYPE", "")
        else:
            v = environ.get("HTTP_" + h.upper().replace("-", "_"), "")
        headers += h + ":" + " ".join(v.split()) + "\n"
    canonical = "\n".join(
        [environ.get("REQUEST_METHOD", ""), path, query, headers, ";".join(signed), "UNSIGNED-PAYLOAD"]
    )
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            q.get("X-Amz-Date", ""),
            "/".join(cred[1:]),
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = ("AWS4" + secret).encode()
    for part in cred[1:]:
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return not hmac.compare_digest(want, q.get("X-Amz-Signature", ""))


def _dispatch_checking_signed_length(self, environ, start_response):
    if _presigned_length_mismatch(environ):
        # Read the body to its end (discarding it), so that the client
        # gets the answer rather than a reset connection.
        body, left = environ.get("wsgi.input"), int(environ.get("CONTENT_LENGTH") or 0)
        while body is not None and left > 0:
            chunk = body.read(min(left, 1 << 16))
            if not chunk:
                break
            left -= len(chunk)
        start_response("403 Forbidden", [("Content-Type", "application/xml")])
        return [
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>'
            b"<Message>The request signature we calculated does not match the signature you provided. "
            b"Check your key and signing method.</Message></Error>"
        ]
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _dispatch_checking_signed_length

# ---- CloudFormation: what a stack of template.yaml needs ------------------
# `stratus dev aws` creates the SAM-transformed template.yaml as a real
# CloudFormation stack (README "What dev aws emulates"). moto 5.2.1 has no
# CloudFormation model for nine of its resource types, and mishandles a few
# intrinsics and properties; each fix below names what it mends.
import json as _json  # noqa: E402
import secrets as _secrets  # noqa: E402
import traceback  # noqa: E402

from moto.cloudformation import models as _cfn_models  # noqa: E402
from moto.cloudformation import parsing as _cfn  # noqa: E402
from moto.core.common_models import CloudFormationModel  # noqa: E402

_clean_json = _cfn.clean_json


def _clean_json_fixed(resource_json, resources_map):
    """clean_json, but a list drops the items that resolve to AWS::NoValue
    (an !If whose branch is !Ref AWS::NoValue removes the item, as
    CloudFormation does; moto keeps a null), and Fn::FindInMap finds a
    mapping key given as a number (a Number parameter's "300" key)."""
    if isinstance(resource_json, list):
        out = []
        for v in resource_json:
            c = _clean_json_fixed(v, resources_map)
            if c is not None:
                out.append(c)
        return out
    if isinstance(resource_json, dict) and "Fn::FindInMap" in resource_json:
        args = resource_json["Fn::FindInMap"]
        result = resources_map[_clean_json_fixed(args[0], resources_map)]
        for path in args[1:]:
            key = _clean_json_fixed(path, resources_map)
            if key not in result:
                key = str(key)
            result = result[key]
        return result
    return _clean_json(resource_json, resources_map)


_cfn.clean_json = _clean_json_fixed


class _ResourceFailed(Exception):
    """A resource's creation failed: its logical id, type and why."""


_parse_and_create_resource = _cfn.parse_and_create_resource


def _parse_and_create_resource_named(logical_id, resource_json, resources_map, account_id, region_name):
    try:
        return _parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name)
    except _ResourceFailed:
        raise
    except Exception as e:  # noqa: BLE001 - named and passed on
        traceback.print_exc()
        why = getattr(e, "message", None) or str(e) or type(e).__name__
        raise _ResourceFailed("%s (%s): %s" % (logical_id, resource_json.get("Type"), why)) from e


_cfn.parse_and_create_resource = _parse_and_create_resource_named


# A resource that fails to create fails the stack (CREATE_FAILED, its
# reason in the stack's events and StackStatusReason), as CloudFormation
# does; moto answers CreateStack with an HTTP 500 and leaves the stack
# CREATE_IN_PROGRESS.
_create_resources = _cfn_models.Stack.create_resources


def _create_resources_or_fail(self):
    try:
        _create_resources(self)
    except Exception as e:  # noqa: BLE001 - any resource's failure fails the stack
        reason = str(e) if isinstance(e, _ResourceFailed) else "%s: %s" % (type(e).__name__, e)
        self.status = "CREATE_FAILED"
        self.status_reason = reason
        self.stack_status_reason = reason
        self._add_stack_event("CREATE_FAILED", resource_status_reason=reason)


_cfn_models.Stack.create_resources = _create_resources_or_fail


def _camel(d):
    """CloudFormation's PascalCase property keys as the API's camelCase."""
    if isinstance(d, list):
        return [_camel(v) for v in d]
    if isinstance(d, dict):
        return {k[:1].lower() + k[1:]: _camel(v) for k, v in d.items()}
    return d


def _str_numbers(d, keys):
    """The numbers under keys as strings (ECS's API has strings where
    CloudFormation gives numbers)."""
    if isinstance(d, dict):
        for k in keys:
            if isinstance(d.get(k), (int, float)) and not isinstance(d.get(k), bool):
                d[k] = str(d[k])
    return d


# ECS task definitions: moto's model keeps only the family, containers,
# volumes and memory; CloudFormation registers every property (Cpu,
# NetworkMode, RequiresCompatibilities, RuntimePlatform, the roles).
# Containers keep Secrets, Environment and Command as given.
from moto.ecs import models as _ecs_models  # noqa: E402


def _task_definition_from_cfn(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    p = cloudformation_json["Properties"]
    family = p.get("Family") or resource_name
    containers = _camel(p.get("ContainerDefinitions", []))
    backend = _ecs_models.ecs_backends[account_id][region_name]
    return backend.register_task_definition(
        family=family,
        container_definitions=containers,
        volumes=_camel(p.get("Volumes", [])),
        network_mode=p.get("NetworkMode"),
        requires_compatibilities=p.get("RequiresCompatibilities"),
        cpu=str(p["Cpu"]) if p.get("Cpu") is not None else None,
        memory=str(p["Memory"]) if p.get("Memory") is not None else None,
        task_role_arn=p.get("TaskRoleArn"),
        execution_role_arn=p.get("ExecutionRoleArn"),
        runtime_platform=_camel(p.get("RuntimePlatform")),
    )


_ecs_models.TaskDefinition.create_from_cloudformation_json = classmethod(_task_definition_from_cfn)


# RunTask sums its containers' memory, failing with a TypeError (HTTP 500)
# on a container that sets none, which a Fargate task definition's may
# (the task's Memory is what counts): such a container counts 0 here.
_resource_requirements = _ecs_models.EC2ContainerServiceBackend._calculate_task_resource_requirements


def _resource_requirements_fargate(task_definition):
    counted = copy.copy(task_definition)  # the registered one is left as it is
    counted.container_definitions = [
        c if any(c.get(k) is not None for k in ("memory", "memoryReservation", "Memory", "MemoryReservation")) else dict(c, memory=0)
        for c in task_definition.container_definitions
    ]
    return _resource_requirements(counted)


_ecs_models.EC2ContainerServiceBackend._calculate_task_resource_requirements = staticmethod(_resource_requirements_fargate)


# EC2 VPCs: moto's model drops EnableDnsHostnames and EnableDnsSupport. An
# awsvpc task's network interface needs a DNS name (RunTask otherwise fails
# with an AttributeError), which moto gives only in a VPC with DNS
# hostnames on, as a VPC that Fargate tasks use has.
from moto.ec2.models import vpcs as _ec2_vpcs  # noqa: E402

_vpc_from_cfn = _ec2_vpcs.VPC.create_from_cloudformation_json.__func__


def _vpc_with_dns(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    vpc = _vpc_from_cfn(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    p = cloudformation_json["Properties"]
    if "EnableDnsHostnames" in p:
        vpc.enable_dns_hostnames = _bool(p["EnableDnsHostnames"])
    if "EnableDnsSupport" in p:
        vpc.enable_dns_support = _bool(p["EnableDnsSupport"])
    return vpc


_ec2_vpcs.VPC.create_from_cloudformation_json = classmethod(_vpc_with_dns)


# DynamoDB tables: moto's model leaves out TimeToLiveSpecification and
# PointInTimeRecoverySpecification; CloudFormation applies both.
from moto.dynamodb.models import table as _ddb_table  # noqa: E402

_table_from_cfn = _ddb_table.Table.create_from_cloudformation_json.__func__


def _table_with_ttl_and_pitr(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    from moto.dynamodb.models import dynamodb_backends

    table = _table_from_cfn(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    p = cloudformation_json["Properties"]
    backend = dynamodb_backends[account_id][region_name]
    if p.get("TimeToLiveSpecification"):
        ttl = p["TimeToLiveSpecification"]
        backend.update_time_to_live(table.name, {"Enabled": _bool(ttl.get("Enabled")), "AttributeName": ttl.get("AttributeName", "")})
    pitr = p.get("PointInTimeRecoverySpecification")
    if pitr and _bool(pitr.get("PointInTimeRecoveryEnabled")):
        backend.update_continuous_backups(table.name, {"PointInTimeRecoveryEnabled": True})
    return table


_ddb_table.Table.create_from_cloudformation_json = classmethod(_table_with_ttl_and_pitr)


# Step Functions state machines: moto's model reads DefinitionString only,
# into the backend that does not execute; CloudFormation takes
# DefinitionS3Location too (where `sam package` leaves a DefinitionUri) and
# applies DefinitionSubstitutions. The machine goes to the backend that
# serves the API (the executing one, turned on above).
from moto.stepfunctions import models as _sfn_models  # noqa: E402


def _state_machine_from_cfn(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    from moto.s3.models import s3_backends
    from moto.stepfunctions.responses import get_backend

    p = cloudformation_json["Properties"]
    definition = p.get("DefinitionString")
    if definition is None and p.get("Definition") is not None:
        definition = _json.dumps(p["Definition"])
    loc = p.get("DefinitionS3Location")
    if definition is None and loc:
        obj = s3_backends[account_id]["aws"].get_object(loc["Bucket"], loc["Key"])
        definition = obj.value.decode()
    for k, v in (p.get("DefinitionSubstitutions") or {}).items():
        definition = definition.replace("${%s}" % k, str(v))
    name = p.get("StateMachineName") or resource_name
    return get_backend(account_id, region_name).create_state_machine(
        name, definition, p.get("RoleArn", ""), tags=_sfn_models.cfn_to_api_tags(p.get("Tags", []))
    )


_sfn_models.StateMachine.create_from_cloudformation_json = classmethod(_state_machine_from_cfn)


# Lambda event source mappings on SQS: the mapping is recorded (Get and
# ListEventSourceMappings show it), but moto does not act on it. dev aws
# plays the event source itself (it receives from the queue and runs the
# handler); moto would, on every SendMessage, receive a batch and try to
# run the function in Docker, and each failed try counts as a receive: a
# dispatch message would reach the dead-letter queue after five sends.
from moto.sqs import models as _sqs_models  # noqa: E402

_sqs_models.Queue.lambda_event_source_mappings = property(lambda self: {}, lambda self, value: None)


def _model(cfn_type, name_property=None, attrs=()):
    """Registers cls as moto's CloudFormation model of cfn_type."""

    def register(cls):
        cls.cloudformation_type = staticmethod(lambda: cfn_type)
        cls.cloudformation_name_type = staticmethod(lambda: name_property)
        cls.has_cfn_attr = classmethod(lambda c, attr: attr in attrs)
        _cfn.get_model_list.cache_clear()
        _cfn.get_model_map.cache_clear()
        _cfn.get_name_type_map.cache_clear()
        return cls

    return register


class _Emulated:
    """A resource of a type moto's CloudFormation lacks: its properties
    kept, its Ref the physical id, its attributes from attrs. Mixed into a
    direct subclass of CloudFormationModel (moto lists only those), whose
    __module__ names the service's models module (moto's model registry
    files a model under it)."""

    def __init__(self, physical_id, properties, attrs=None):
        self.physical_id = physical_id
        self.properties = properties
        self.attrs = attrs or {}

    @property
    def physical_resource_id(self):
        return self.physical_id

    def get_cfn_attribute(self, attribute_name):
        if attribute_name in self.attrs:
            return self.attrs[attribute_name]
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        raise UnformattedGetAttTemplateException()

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
        pass


@_model("AWS::SecretsManager::Secret", "Name", ("Id",))
class _Secret(_Emulated, CloudFormationModel):
    """A Secrets Manager secret, made in moto's Secrets Manager: SecretString,
    or one GenerateSecretString makes (its SecretStringTemplate and
    GenerateStringKey included). Ref: its ARN."""
    __module__ = "moto.secretsmanager.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.secretsmanager.models import secretsmanager_backends

        p = cloudformation_json.get("Properties", {})
        backend = secretsmanager_backends[account_id][region_name]
        value = p.get("SecretString")
        gen = p.get("GenerateSecretString")
        if value is None and gen is not None:
            pw = backend.get_random_password(
                password_length=int(gen.get("PasswordLength", 32)),
                exclude_characters=gen.get("ExcludeCharacters", ""),
                exclude_numbers=_bool(gen.get("ExcludeNumbers")),
                exclude_punctuation=_bool(gen.get("ExcludePunctuation")),
                exclude_uppercase=_bool(gen.get("ExcludeUppercase")),
                exclude_lowercase=_bool(gen.get("ExcludeLowercase")),
                include_space=_bool(gen.get("IncludeSpace")),
                require_each_included_type=_bool(gen.get("RequireEachIncludedType", True)),
            )
            pw = _json.loads(pw)["RandomPassword"] if pw.startswith("{") else pw
            if gen.get("SecretStringTemplate") and gen.get("GenerateStringKey"):
                doc = _json.loads(gen["SecretStringTemplate"])
                doc[gen["GenerateStringKey"]] = pw
                value = _json.dumps(doc)
            else:
                value = pw
        backend.create_secret(
            name=resource_name,
            secret_string=value,
            secret_binary=None,
            description=p.get("Description"),
            tags=p.get("Tags"),
            kms_key_id=p.get("KmsKeyId"),
            client_request_token=None,
            replica_regions=[],
            force_overwrite=False,
        )
        arn = backend.secrets[resource_name].arn
        return cls(arn, p, {"Id": arn})


def _bool(v):
    return v is True or str(v).lower() == "true"


@_model("AWS::S3::BucketPolicy")
class _BucketPolicy(_Emulated, CloudFormationModel):
    """The bucket's policy, put on moto's bucket. Ref: the bucket's name."""
    __module__ = "moto.s3.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.s3.models import s3_backends

        p = cloudformation_json["Properties"]
        s3_backends[account_id]["aws"].put_bucket_policy(p["Bucket"], _json.dumps(p["PolicyDocument"]).encode())
        return cls(p["Bucket"], p)


# A bucket policy statement's conditions: moto evaluates StringEquals only,
# takes any other operator as met, and a statement whose condition is not
# met as a Deny, so template.yaml's DenyInsecureTransport (Bool
# aws:SecureTransport "false") denied every request. Here a statement
# applies only when its conditions hold, Bool included, and a request to the
# stand-in counts as made over TLS, as the SDK's requests to S3 are.
from moto.s3 import models as _s3_models  # noqa: E402

_REQUEST_CONTEXT = {"aws:SecureTransport": "true"}


def _condition_holds(condition):
    for op, pairs in (condition or {}).items():
        for key, expected in pairs.items():
            values = [str(v).lower() for v in (expected if isinstance(expected, list) else [expected])]
            actual = _REQUEST_CONTEXT.get(key)
            if op in ("Bool", "StringEquals", "StringEqualsIgnoreCase") and (actual is None or actual.lower() not in values):
                return False
    return True


def _bucket_permission(self, action, resource):
    from moto.iam.access_control import IAMPolicy, PermissionResult

    if self.policy is None:
        return PermissionResult.NEUTRAL
    doc = _json.loads(self.policy.decode())
    statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
    applicable = [{k: v for k, v in st.items() if k != "Condition"} for st in statements if _condition_holds(st.get("Condition"))]
    if not applicable:
        return PermissionResult.NEUTRAL
    return IAMPolicy(_json.dumps({"Version": "2012-10-17", "Statement": applicable})).is_action_permitted(action, resource)


_s3_models.FakeBucket.get_permission = _bucket_permission


@_model("AWS::SNS::Subscription", attrs=("Arn",))
class _Subscription(_Emulated, CloudFormationModel):
    """A subscription made in moto's SNS. Ref: its ARN."""
    __module__ = "moto.sns.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.sns.models import sns_backends

        p = cloudformation_json["Properties"]
        sub = sns_backends[account_id][region_name].subscribe(p["TopicArn"], p["Endpoint"], p["Protocol"])
        return cls(sub.arn, p, {"Arn": sub.arn})


@_model("AWS::SNS::TopicPolicy", attrs=("Id",))
class _TopicPolicy(_Emulated, CloudFormationModel):
    """Each topic's Policy attribute, set in moto's SNS."""
    __module__ = "moto.sns.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.sns.models import sns_backends

        p = cloudformation_json["Properties"]
        for topic in p["Topics"]:
            sns_backends[account_id][region_name].set_topic_attribute(topic, "Policy", _json.dumps(p["PolicyDocument"]))
        return cls(resource_name, p, {"Id": resource_name})


@_model("AWS::CloudWatch::Alarm", "AlarmName", ("Arn",))
class _Alarm(_Emulated, CloudFormationModel):
    """An alarm put in moto's CloudWatch. Ref: its name."""
    __module__ = "moto.cloudwatch.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.cloudwatch.models import MetricDataQuery, cloudwatch_backends

        p = cloudformation_json["Properties"]
        queries = None
        if p.get("Metrics"):
            queries = [
                MetricDataQuery(
                    query_id=m["Id"],
                    label=m.get("Label", ""),
                    period=str(m.get("Period", "")),
                    return_data=str(m.get("ReturnData", True)).lower(),
                    expression=m.get("Expression"),
                )
                for m in p["Metrics"]
            ]
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=resource_name,
            namespace=p.get("Namespace"),
            metric_name=p.get("MetricName"),
            comparison_operator=p.get("ComparisonOperator"),
            evaluation_periods=int(p.get("EvaluationPeriods", 1)),
            period=int(p.get("Period", 60)),
            threshold=float(p.get("Threshold", 0)),
            statistic=p.get("Statistic"),
            description=p.get("AlarmDescription"),
            dimensions=p.get("Dimensions", []),
            alarm_actions=p.get("AlarmActions", []),
            metric_data_queries=queries,
            datapoints_to_alarm=int(p["DatapointsToAlarm"]) if p.get("DatapointsToAlarm") else None,
            treat_missing_data=p.get("TreatMissingData"),
        )
        return cls(resource_name, p, {"Arn": alarm.alarm_arn})


@_model("AWS::ApplicationAutoScaling::ScalableTarget", attrs=("Id",))
class _ScalableTarget(_Emulated, CloudFormationModel):
    """A scalable target registered in moto's Application Auto Scaling.
    Ref: "ResourceId|ScalableDimension|ServiceNamespace", as CloudFormation's."""
    __module__ = "moto.applicationautoscaling.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.applicationautoscaling.models import applicationautoscaling_backends

        p = cloudformation_json["Properties"]
        applicationautoscaling_backends[account_id][region_name].register_scalable_target(
            p["ServiceNamespace"],
            p["ResourceId"],
            p["ScalableDimension"],
            int(p["MinCapacity"]),
            int(p["MaxCapacity"]),
            p.get("RoleARN"),
            p.get("SuspendedState"),
        )
        pid = "|".join([p["ResourceId"], p["ScalableDimension"], p["ServiceNamespace"]])
        return cls(pid, p, {"Id": pid})


@_model("AWS::ApplicationAutoScaling::ScalingPolicy", attrs=("Arn",))
class _ScalingPolicy(_Emulated, CloudFormationModel):
    """A scaling policy put in moto's Application Auto Scaling. Ref: its ARN."""
    __module__ = "moto.applicationautoscaling.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.applicationautoscaling.models import applicationautoscaling_backends

        p = cloudformation_json["Properties"]
        if p.get("ScalingTargetId"):
            rid, dim, ns = p["ScalingTargetId"].split("|")
        else:
            rid, dim, ns = p["ResourceId"], p["ScalableDimension"], p["ServiceNamespace"]
        body = {}
        for k in ("StepScalingPolicyConfiguration", "TargetTrackingScalingPolicyConfiguration"):
            if k in p:
                body[k] = p[k]
        policy = applicationautoscaling_backends[account_id][region_name].put_scaling_policy(
            p["PolicyName"], ns, rid, dim, body, p.get("PolicyType")
        )
        return cls(policy.policy_arn, p, {"Arn": policy.policy_arn})


@_model("AWS::ApiGatewayV2::Api", attrs=("ApiEndpoint", "ApiId"))
class _HttpApi(_Emulated, CloudFormationModel):
    """An API made in moto's API Gateway v2 (its name and protocol; its
    routes are served by dev aws). Ref: its id."""
    __module__ = "moto.apigatewayv2.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.apigatewayv2.models import apigatewayv2_backends

        p = cloudformation_json.get("Properties", {})
        body = p.get("Body") or {}
        api = apigatewayv2_backends[account_id][region_name].create_api(
            api_key_selection_expression=None,
            cors_configuration=None,
            description=p.get("Description"),
            disable_schema_validation=None,
            disable_execute_api_endpoint=p.get("DisableExecuteApiEndpoint"),
            name=p.get("Name") or body.get("info", {}).get("title") or resource_name,
            protocol_type=p.get("ProtocolType", "HTTP"),
            route_selection_expression=None,
            tags=p.get("Tags") or {},
            version=None,
        )
        endpoint = "https://%s.execute-api.%s.amazonaws.com" % (api.api_id, region_name)
        return cls(api.api_id, p, {"ApiEndpoint": endpoint, "ApiId": api.api_id})


@_model("AWS::ApiGatewayV2::Stage", "StageName")
class _HttpStage(_Emulated, CloudFormationModel):
    """A stage made in moto's API Gateway v2. Ref: its name."""
    __module__ = "moto.apigatewayv2.models"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.apigatewayv2.models import apigatewayv2_backends

        p = cloudformation_json["Properties"]
        name = p.get("StageName") or resource_name
        config = {"stageName": name, "autoDeploy": p.get("AutoDeploy")}
        if p.get("DefaultRouteSettings"):
            config["defaultRouteSettings"] = _camel(p["DefaultRouteSettings"])
        if p.get("AccessLogSettings"):
            config["accessLogSettings"] = _camel(p["AccessLogSettings"])
        apigatewayv2_backends[account_id][region_name].create_stage(p["ApiId"], config)
        return cls(name, p)



# ---- ECS: a task's numbers as the ECS API sends them ---------------------
# moto 5.2.1 answers RunTask, DescribeTasks and StopTask with a task's
# containers' cpu and memory as JSON numbers (every container gets "cpu":
# 0), where the ECS API has strings; the Go SDK refuses the whole answer.
# The functions' own bootstraps call ECS unmended (they run as shipped,
# under the Lambda emulator), so the model holds strings.
_container_init = _ecs_models.Container.__init__


def _container_init_strings(self, task_def):
    _container_init(self, task_def)
    for k in ("cpu", "memory"):
        v = getattr(self, k, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            setattr(self, k, str(int(v)) if float(v).is_integer() else str(v))


_ecs_models.Container.__init__ = _container_init_strings

# moto 5.2.1 stores the inline policies of a role CloudFormation creates
# (AWS::IAM::Role Policies) as the template's mapping, and GetRolePolicy
# then answers Python's repr of it, not a JSON document. IAM returns the
# policy document as JSON (URL-encoded), and the Fargate stand-in reads a
# task's execution role's policies to decide whether ECS could read its
# secrets (internal/devstack/fargate: mayReadSecret): a mapping is stored
# as its JSON.
import json  # noqa: E402

from moto.iam.models import Role as _IAMRole  # noqa: E402

_role_put_policy = _IAMRole.put_policy


def _role_put_policy_json(self, policy_name, policy_json):
    if not isinstance(policy_json, str):
        policy_json = json.dumps(policy_json)
    _role_put_policy(self, policy_name, policy_json)


_IAMRole.put_policy = _role_put_policy_json

from moto.server import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1:])

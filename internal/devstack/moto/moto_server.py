"""Start moto's server with Stratus's workarounds for moto 5.2.1.

DESIGN.md § Testing stand-ins: turn on real Step Functions execution, and
patch StateMachine.__deepcopy__ so that every StartExecution after the first
does not fail with a 500 (upstream moto issue 10077): the copy shares the
backend and leaves the live executions behind; keep SendTaskFailure's cause;
give a retried callback state a new task token;
serve DynamoDB requests one at a time; check the signature of a presigned S3 request that signs its
Content-Length (see below).

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

from moto.server import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1:])

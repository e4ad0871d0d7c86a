"""Start moto's server with Stratus's workarounds for moto 5.2.1.

DESIGN.md § Testing stand-ins: turn on real Step Functions execution, and
patch StateMachine.__deepcopy__ so that every StartExecution after the first
does not fail with a 500 (upstream moto issue 10077): the copy shares the
backend and leaves the live executions behind; serve DynamoDB requests one at
a time (see below).

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

from moto.server import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1:])

"""Transform a SAM template as `sam deploy` does, with no AWS account.

Reads a JSON object on stdin: {"template": "<YAML or JSON text>",
"parameters": {"Name": "value", ...}, "region": "us-east-1"}; prints the
transformed CloudFormation template as JSON on stdout. On a translator
failure, prints its message (which names the resource) on stderr and exits 2;
exits 3 when samtranslator cannot be imported.

The managed-policy loader is a static map: the stand-in needs no IAM lookup
(the translator asks for one only when a function names a managed policy by
its short name, which template.yaml does not).
"""
import json
import os
import sys

try:
    import yaml
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.translator.transform import transform
except ImportError as e:  # pragma: no cover - said by the caller
    print("cannot import samtranslator: %s" % e, file=sys.stderr)
    sys.exit(3)


class _Loader(yaml.SafeLoader):
    pass


def _intrinsic(loader, tag_suffix, node):
    """CloudFormation's short forms: !Ref X, !GetAtt A.B, !Sub ..., !If [...]."""
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    if tag_suffix == "Condition":
        return {"Condition": value}
    return {"Fn::" + tag_suffix: value}


_Loader.add_multi_constructor("!", _intrinsic)


class _StaticPolicies:
    """A ManagedPolicyLoader that asks nothing of IAM."""

    def load(self):
        return {
            "AWSLambdaBasicExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
            "AWSLambdaSQSQueueExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
            "AWSXRayDaemonWriteAccess": "arn:aws:iam::aws:policy/AWSXRayDaemonWriteAccess",
        }


def main():
    req = json.load(sys.stdin)
    region = req.get("region") or "us-east-1"
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    template = yaml.load(req["template"], Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    params = dict(req.get("parameters") or {})
    params.setdefault("AWS::Region", region)
    params.setdefault("AWS::Partition", "aws")
    params.setdefault("AWS::AccountId", "123456789012")
    try:
        out = transform(template, params, _StaticPolicies())
    except InvalidDocumentException as e:
        print("; ".join(str(c) for c in e.causes) or str(e), file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # the translator's other failures name what they could not read
        print("%s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(2)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

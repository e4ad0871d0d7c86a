"""Transform a SAM template as `sam deploy` does, with no AWS account.

Reads a JSON object on stdin: {"template": "<YAML or JSON text>",
"parameters": {"Name": "value", ...}, "region": "us-east-1",
"artifacts": {"LogicalId": {"Bucket": ..., "Key": ...}}, "inspect": false}.

With inspect, prints {"LogicalId": "<CodeUri or DefinitionUri>"} for every
AWS::Serverless::Function and AWS::Serverless::StateMachine whose code or
definition is a local path (what `sam package` uploads). Otherwise points
each of those named in artifacts at its S3 object, as `sam package` leaves
them, and prints the transformed CloudFormation template as JSON on stdout.

On a template or translator failure, prints the message (which names the
resource) on stderr and exits 2; exits 3 when samtranslator cannot be
imported.

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
# Dates stay strings, as CloudFormation reads them (an unquoted
# AWSTemplateFormatVersion: 2010-09-09 is common).
_Loader.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"] for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


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
    try:
        template = yaml.load(req["template"], Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        print("the template is not YAML: %s" % e, file=sys.stderr)
        sys.exit(2)
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        print("the template has no Resources mapping", file=sys.stderr)
        sys.exit(2)
    local = {}
    for rid, res in template["Resources"].items():
        if not isinstance(res, dict):
            continue
        props = res.get("Properties") or {}
        prop = {"AWS::Serverless::Function": "CodeUri", "AWS::Serverless::StateMachine": "DefinitionUri"}.get(res.get("Type"))
        if prop and isinstance(props.get(prop), str) and not props[prop].startswith("s3://"):
            local[rid] = (prop, props[prop])
    if req.get("inspect"):
        json.dump({rid: uri for rid, (_, uri) in local.items()}, sys.stdout)
        return
    for rid, loc in (req.get("artifacts") or {}).items():
        if rid in local:
            template["Resources"][rid]["Properties"][local[rid][0]] = {"Bucket": loc["Bucket"], "Key": loc["Key"]}
    params = dict(req.get("parameters") or {})
    params.setdefault("AWS::Region", region)
    params.setdefault("AWS::Partition", "aws")
    params.setdefault("AWS::AccountId", "123456789012")
    try:
        out = transform(template, params, _StaticPolicies())
    except InvalidDocumentException as e:
        print(" ".join(getattr(c, "message", str(c)) for c in e.causes) or e.message, file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # the translator's other failures name what they could not read
        print("%s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(2)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

package fargate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
)

// IAM reads a task's execution role on the IAM stand-in.
type IAM interface {
	ListRolePolicies(ctx context.Context, in *awsiam.ListRolePoliciesInput, o ...func(*awsiam.Options)) (*awsiam.ListRolePoliciesOutput, error)
	GetRolePolicy(ctx context.Context, in *awsiam.GetRolePolicyInput, o ...func(*awsiam.Options)) (*awsiam.GetRolePolicyOutput, error)
}

var _ IAM = (*awsiam.Client)(nil)

// mayReadSecret checks, as IAM would before ECS's agent reads a secret
// with the task's execution role ("Amazon ECS task execution IAM role":
// secretsmanager:GetSecretValue on the secret), that role (an ARN) has an
// inline policy allowing secretsmanager:GetSecretValue on secretARN.
// Errors: AccessDeniedException, as Secrets Manager answers, when none
// does; the stand-in's when the role cannot be read.
//
// It is the stand-in's reading of a policy, not IAM's evaluation: inline
// policies only (template.yaml grants every secret inline), Allow
// statements with "*" and "?" wildcards in their actions and resources;
// an explicit Deny, a condition and a managed policy are not looked at.
func mayReadSecret(ctx context.Context, c IAM, role, secretARN string) error {
	const action = "secretsmanager:GetSecretValue"
	if role == "" {
		return fmt.Errorf("AccessDeniedException: the task definition has no execution role to read %s with", secretARN)
	}
	name := role[strings.LastIndex(role, "/")+1:]
	var names []string
	var marker *string
	for {
		out, err := c.ListRolePolicies(ctx, &awsiam.ListRolePoliciesInput{RoleName: aws.String(name), Marker: marker})
		if err != nil {
			return fmt.Errorf("the execution role %s: %w", role, err)
		}
		names = append(names, out.PolicyNames...)
		if !out.IsTruncated || out.Marker == nil {
			break
		}
		marker = out.Marker
	}
	for _, p := range names {
		out, err := c.GetRolePolicy(ctx, &awsiam.GetRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(p)})
		if err != nil {
			return fmt.Errorf("the execution role %s's policy %s: %w", role, p, err)
		}
		if allows(aws.ToString(out.PolicyDocument), action, secretARN) {
			return nil
		}
	}
	return fmt.Errorf("AccessDeniedException: %s is not authorized to perform: %s on resource: %s because no identity-based policy allows the %s action",
		role, action, secretARN, action)
}

// allows reports whether the policy document doc (JSON, or JSON
// URL-encoded as IAM returns it) has an Allow statement granting action on
// resource.
func allows(doc, action, resource string) bool {
	if !strings.HasPrefix(strings.TrimSpace(doc), "{") {
		if d, err := url.PathUnescape(doc); err == nil {
			doc = d
		}
	}
	var pol struct {
		Statement json.RawMessage
	}
	if json.Unmarshal([]byte(doc), &pol) != nil {
		return false
	}
	var sts []map[string]json.RawMessage
	if json.Unmarshal(pol.Statement, &sts) != nil {
		var one map[string]json.RawMessage
		if json.Unmarshal(pol.Statement, &one) != nil {
			return false
		}
		sts = []map[string]json.RawMessage{one}
	}
	for _, st := range sts {
		var effect string
		json.Unmarshal(st["Effect"], &effect)
		if effect == "Allow" && anyMatch(st["Action"], action, true) && anyMatch(st["Resource"], resource, false) {
			return true
		}
	}
	return false
}

// anyMatch reports whether one of the patterns of v (a string or a list
// of them) matches s, with IAM's wildcards "*" and "?" (actions compared
// without case, as IAM does).
func anyMatch(v json.RawMessage, s string, fold bool) bool {
	var list []string
	if json.Unmarshal(v, &list) != nil {
		var one string
		if json.Unmarshal(v, &one) != nil {
			return false
		}
		list = []string{one}
	}
	for _, p := range list {
		re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(p)) + "$"
		if fold {
			re = "(?i)" + re
		}
		if regexp.MustCompile(re).MatchString(s) {
			return true
		}
	}
	return false
}

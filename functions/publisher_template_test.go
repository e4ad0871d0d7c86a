package functions_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/launch"
)

// mentions reports whether v (a raw resource, intrinsics as written)
// refers to the parameter or resource id: a Ref, a GetAtt, or a ${id} of
// an Fn::Sub.
func mentions(v any, id string) bool {
	s := jsonOf(v)
	return strings.Contains(s, `{"Ref":"`+id+`"}`) || strings.Contains(s, `"Fn::GetAtt":["`+id+`"`) ||
		strings.Contains(s, `"Fn::GetAtt":"`+id+`.`) || strings.Contains(s, "${"+id+"}") || strings.Contains(s, "${"+id+".")
}

// docs/architecture.md § Publishing: the git host's token (GitTokenSecretArn,
// empty by default) reaches the publisher only. Exactly one task definition
// names it, PublisherTaskDefinition, as its container's STRATUS_GIT_TOKEN
// secret, dropped when the parameter is empty; exactly one role may read it,
// the publisher's own execution role, which no other task definition uses
// and which may read nothing else; no function, state machine or other role
// names it, and no function's environment carries it or a variable of its
// name.
func TestTemplate_GitTokenReachesThePublisherOnly(t *testing.T) {
	tp := loadTemplate(t)
	p, ok := tp.params["GitTokenSecretArn"]
	if !ok || p["Default"] != "" || str(p["Description"]) == "" || !strings.Contains(str(p["AllowedPattern"]), "secretsmanager") {
		t.Fatalf("parameter GitTokenSecretArn is %v; want one, empty by default, described, a Secrets Manager ARN pattern", p)
	}
	var naming []string
	for id, r := range tp.raw {
		if mentions(r, "GitTokenSecretArn") {
			naming = append(naming, id)
		}
	}
	slices.Sort(naming)
	if want := []string{"PublisherExecutionRole", "PublisherTaskDefinition"}; !slices.Equal(naming, want) {
		t.Errorf("resources naming GitTokenSecretArn: %v; want exactly %v", naming, want)
	}

	// The publisher's container: STRATUS_GIT_TOKEN from the parameter, only
	// when it is given, and no other secret (it runs no engine).
	td := tp.props("PublisherTaskDefinition")
	c := asMap(asList(td["ContainerDefinitions"])[0])
	secrets := asList(c["Secrets"])
	if len(secrets) != 1 {
		t.Fatalf("the publisher's secrets are %v; want the git token alone", secrets)
	}
	br := asList(asMap(secrets[0])["Fn::If"])
	if len(br) != 3 || str(br[0]) != "HasGitToken" || !refTo(br[2], "AWS::NoValue") ||
		str(asMap(br[1])["Name"]) != launch.GitTokenEnv || !refTo(asMap(br[1])["ValueFrom"], "GitTokenSecretArn") {
		t.Errorf("the publisher's secret is %v; want !If [HasGitToken, {Name: %s, ValueFrom: !Ref GitTokenSecretArn}, !Ref AWS::NoValue]", secrets[0], launch.GitTokenEnv)
	}
	if jsonOf(tp.conditions["HasGitToken"]) != `{"Fn::Not":[{"Fn::Equals":[{"Ref":"GitTokenSecretArn"},""]}]}` {
		t.Errorf("condition HasGitToken is %s; want GitTokenSecretArn not empty", jsonOf(tp.conditions["HasGitToken"]))
	}
	if _, ok := td["TaskRoleArn"]; ok {
		t.Error("PublisherTaskDefinition has a task role: the publisher would hold AWS credentials")
	}
	if !refTo(td["ExecutionRoleArn"], "PublisherExecutionRole") {
		t.Errorf("PublisherTaskDefinition's execution role is %v; want PublisherExecutionRole", td["ExecutionRoleArn"])
	}
	for _, other := range tp.ofType("AWS::ECS::TaskDefinition") {
		if other != "PublisherTaskDefinition" && mentions(tp.raw[other], "PublisherExecutionRole") {
			t.Errorf("%s uses the publisher's execution role, which may read the git token", other)
		}
		for _, s := range asList(asMap(asList(tp.props(other)["ContainerDefinitions"])[0])["Secrets"]) {
			if strings.Contains(jsonOf(s), launch.GitTokenEnv) && other != "PublisherTaskDefinition" {
				t.Errorf("%s has a %s secret", other, launch.GitTokenEnv)
			}
		}
	}
	for _, svc := range tp.ofType("AWS::ECS::Service") {
		if refTo(tp.props(svc)["TaskDefinition"], "PublisherTaskDefinition") {
			t.Errorf("the service %s runs the publisher: a warm runner would hold the git token", svc)
		}
	}

	// Its execution role: ECS's managed policy (image pull, logs) and, when
	// the parameter is given, GetSecretValue on exactly that ARN.
	role := tp.props("PublisherExecutionRole")
	if m := asList(role["ManagedPolicyArns"]); len(m) != 1 || !strings.HasSuffix(jsonOf(m[0]), `service-role/AmazonECSTaskExecutionRolePolicy"}`) {
		t.Errorf("the publisher's execution role's managed policies are %v; want AmazonECSTaskExecutionRolePolicy alone", m)
	}
	pols := asList(role["Policies"])
	if len(pols) != 1 {
		t.Fatalf("the publisher's execution role has policies %v; want the git token's alone", pols)
	}
	pb := asList(asMap(pols[0])["Fn::If"])
	if len(pb) != 3 || str(pb[0]) != "HasGitToken" || !refTo(pb[2], "AWS::NoValue") {
		t.Fatalf("the publisher's execution role's policy is %v; want !If [HasGitToken, policy, !Ref AWS::NoValue]", pols[0])
	}
	sts := asList(asMap(asMap(pb[1])["PolicyDocument"])["Statement"])
	if len(sts) != 1 || str(asMap(sts[0])["Effect"]) != "Allow" || jsonOf(asMap(sts[0])["Action"]) != `"secretsmanager:GetSecretValue"` ||
		!refTo(asMap(sts[0])["Resource"], "GitTokenSecretArn") {
		t.Errorf("the publisher's execution role may %v; want secretsmanager:GetSecretValue on GitTokenSecretArn alone", sts)
	}

	// No function carries the token or may read it; the service functions
	// launch the publisher: its task definition in their environment, RunTask
	// on it and PassRole of its execution role.
	for _, fn := range tp.ofType("AWS::Serverless::Function") {
		env := tp.env(fn)
		if _, ok := env[launch.GitTokenEnv]; ok {
			t.Errorf("%s's environment has %s", fn, launch.GitTokenEnv)
		}
		for k, v := range env {
			if mentions(v, "GitTokenSecretArn") {
				t.Errorf("%s's %s names the git token's secret", fn, k)
			}
		}
		if allows(tp, fn, "secretsmanager:GetSecretValue", "GitTokenSecretArn") {
			t.Errorf("%s may read the git token", fn)
		}
	}
	for _, fn := range serviceFunctions {
		if v := tp.env(fn)[awsapp.EnvPublisherTaskDefinition]; !refTo(v, "PublisherTaskDefinition") {
			t.Errorf("%s's %s is %v; want !Ref PublisherTaskDefinition", fn, awsapp.EnvPublisherTaskDefinition, v)
		}
		if !allows(tp, fn, "ecs:RunTask", "PublisherTaskDefinition") || !allows(tp, fn, "iam:PassRole", "PublisherExecutionRole") {
			t.Errorf("%s may not run the publisher (ecs:RunTask on PublisherTaskDefinition, iam:PassRole on PublisherExecutionRole)", fn)
		}
	}
}

// The publisher is the network runner (its image, NetworkImageUri else
// ImageUri; its size and platform) but for its family, its log stream
// prefix, its execution role and its secrets.
func TestTemplate_PublisherIsTheNetworkRunnerWithTheToken(t *testing.T) {
	tp := loadTemplate(t)
	strip := func(td string) string {
		props := maps.Clone(tp.props(td))
		delete(props, "Family")
		delete(props, "ExecutionRoleArn")
		c := maps.Clone(asMap(asList(props["ContainerDefinitions"])[0]))
		delete(c, "Secrets")
		lc := maps.Clone(asMap(c["LogConfiguration"]))
		opts := maps.Clone(asMap(lc["Options"]))
		delete(opts, "awslogs-stream-prefix")
		lc["Options"], c["LogConfiguration"] = opts, lc
		props["ContainerDefinitions"] = []any{c}
		return jsonOf(props)
	}
	if a, b := strip("PublisherTaskDefinition"), strip("NetworkRunnerTaskDefinition"); a != b {
		t.Errorf("PublisherTaskDefinition diverges from NetworkRunnerTaskDefinition:\n  publisher %s\n  network   %s", a, b)
	}
	if _, ok := tp.outputs["PublisherTaskDefinitionArn"]; !ok {
		t.Error("no output PublisherTaskDefinitionArn")
	}
}

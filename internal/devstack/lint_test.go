package devstack_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/testenv"
)

// What CloudFormation deploys is the transformed template, not
// template.yaml: cfn-lint on template.yaml does not see every resource the
// translator writes, nor every statement as IAM reads it (an action that
// is no IAM action, such as dynamodb:TransactWriteItems, is W3037 there
// only). The transformed template must lint clean, informational stateful
// checks included (I3011: every stateful resource says what its deletion
// does; I3013: a queue says how long it keeps messages).
func TestTransformedTemplate_LintsClean(t *testing.T) {
	t.Parallel()
	if why := devstack.MissingTranslator(); why != "" {
		testenv.Missing(t, "aws-sam-translator", why)
	}
	lint := testenv.MustHaveCommand(t, "cfn-lint", "lint the transformed template")
	tpl, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids, err := devstack.LocalArtifacts(ctx, tpl, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	arts := map[string]devstack.S3Location{}
	for id := range ids {
		arts[id] = devstack.S3Location{Bucket: "artifacts", Key: id + ".zip"}
	}
	params := map[string]string{"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/stratus-runner:latest",
		"VpcId": "vpc-0123456789abcdef0", "WorkerSubnetIds": "subnet-0123456789abcdef0", "RunnerPool": "on",
		"AnthropicApiKeySecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:anthropic-AbCdEf",
		"GitTokenSecretArn":        "arn:aws:secretsmanager:us-east-1:123456789012:secret:git-token-AbCdEf",
		"EngineSecretsKmsKeyArn":   "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"}
	out, err := devstack.Transform(ctx, tpl, params, arts, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "transformed.json")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lint, "--include-checks", "I3011", "I3013", "--", f)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("cfn-lint on the transformed template: %v\n%s", err, b)
	}
}

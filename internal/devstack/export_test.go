package devstack

import "github.com/stratusflow/stratus/internal/devstack/lambdas"

// BootstrapZip is bootstrapZip, for the tests' expected code hashes.
var BootstrapZip = bootstrapZip

// LocalArtifacts is localArtifacts, for the lint of the transformed template.
var LocalArtifacts = localArtifacts

// ClaimSourcesOf is what Serve feeds the claim function from on st: the
// queue, the bucket its S3 rule watches and the prefix, the schedule
// rule's ARN; ok false when st has no claim function's queue.
func ClaimSourcesOf(tmpl []byte, st *Stack, region string) (queueURL, bucket, prefix, ruleARN string, ok bool, err error) {
	c, err := claimSources(tmpl, st, &lambdas.Function{}, region)
	if err != nil || c == nil {
		return "", "", "", "", false, err
	}
	return c.queueURL, c.bucket, c.rule.KeyPrefix, c.ruleARN, true, nil
}

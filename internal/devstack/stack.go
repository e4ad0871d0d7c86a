package devstack

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsrun"
)

// Stack is a stack of template.yaml deployed on a stand-in (Create), as
// its real outputs and resources say (Load): nothing here is a second
// description of the stack. Runs create their own state machines
// (StateMachinePrefix, Role).
type Stack struct {
	Name           string
	Table          string
	Bucket         string
	QueueURL       string
	SecretARN      string
	Cluster        string // ARN
	TaskDef        string // RunnerTaskDefinition's ARN
	NetworkTaskDef string // NetworkRunnerTaskDefinition's ARN
	// PublisherTaskDef is PublisherTaskDefinition's ARN: the worker of
	// publish nodes, the only one given the git token ("" on a stack of
	// an older template).
	PublisherTaskDef string
	Role             string // StateMachineRole's ARN: the state machines' execution role
	StateMachine     string // ImplementationStateMachine's ARN
	APIURL           string // the ApiUrl output: the worker API (ApiUrlOverride on a stand-in)
	// PoolQueueURL and PoolNetworkQueueURL are the warm runner pool's
	// assignment queues, on a stack with RunnerPool on (CreateOptions.Pool).
	PoolQueueURL        string
	PoolNetworkQueueURL string
	// ClaimQueueURL is the queue that wakes the task pool's claim
	// function (the ClaimQueueUrl output; "" on a stack of an older
	// template).
	ClaimQueueURL string
	// VPC and the subnets are the stack's VpcId, WorkerSubnetIds and
	// NetworkWorkerSubnetIds (WorkerSubnetIds when empty); the security
	// groups are its WorkerSecurityGroup and NetworkWorkerSecurityGroup.
	VPC                   string
	Subnets               []string
	NetworkSubnets        []string
	SecurityGroups        []string
	NetworkSecurityGroups []string
	// Functions maps each AWS::Lambda::Function's logical id to its
	// physical name (GetFunctionConfiguration takes it).
	Functions map[string]string
	// Resources maps every resource's logical id to its physical id;
	// Outputs every output's key to its value.
	Resources map[string]string
	Outputs   map[string]string
	// Warnings are what Create deployed that AWS would refuse (a
	// HeartbeatSeconds or RunnerPoolPickupSeconds outside the template's
	// constraints, for tests).
	Warnings []string
}

// CreateOptions are what a stand-in's stack is made from.
type CreateOptions struct {
	// HeartbeatSeconds is the stack's HeartbeatSeconds parameter (0: the
	// template's default).
	HeartbeatSeconds int
	// PoolPickupSeconds is the stack's RunnerPoolPickupSeconds parameter
	// (0: the template's default): how long dispatch waits for a pooled
	// runner before RunTask.
	PoolPickupSeconds int
	// Pool sets RunnerPool on: the warm runners' queues, services and
	// scaling.
	Pool bool
	// Template is the SAM template (nil: the repository's template.yaml,
	// stratus.SAMTemplate). Its DefinitionUri paths are read from
	// stratus.SAMApp.
	Template []byte
	// Bootstraps maps a function's logical id (WorkerApiFunction, …) to
	// its built `bootstrap` (or a zip holding one), uploaded as its code;
	// a function without one gets a placeholder bootstrap that exits 1.
	Bootstraps map[string]string
	// Parameters override the template's parameters, after the
	// template's defaults, SAMConfig's and what the stand-in sets
	// (ImageUri, VpcId, the subnets, ApiUrlOverride, HeartbeatSeconds,
	// RunnerPool).
	Parameters map[string]string
	// SAMConfig is a samconfig.toml whose parameter_overrides apply
	// before the stand-in's (nil: none).
	SAMConfig []byte
}

// ErrParameter is returned (wrapped, naming the parameter, its value and
// what is valid) for a parameter value the template's constraints refuse,
// or a parameter set that the template does not declare.
var ErrParameter = errors.New("a parameter the template refuses")

// ArtifactsBucket is the stand-in's bucket of the functions' code and the
// state machine definitions, as `sam package` uploads them.
const ArtifactsBucket = "stratus-dev-sam-artifacts"

// DevImage is the runner image a stand-in's stack names (ImageUri) unless
// CreateOptions.Parameters gives one.
const DevImage = "stratus-runner:dev"

// Create deploys the SAM template (o.Template, else template.yaml) on the
// stand-in cfg points at as the CloudFormation stack name, as `sam deploy`
// would: a `<name>-network` stack first (a VPC and two subnets, what an
// account has), the functions' code and the definitions uploaded to
// ArtifactsBucket, the template transformed by the SAM translator
// (Transform) and created with its parameters; apiURL is where the worker
// API will listen (ApiUrlOverride). It returns the stack as Load reads it.
// Errors: ErrTransform (the translator's message), the stack's
// CREATE_FAILED reason (it names the resource), or the first AWS call
// that fails.
func Create(ctx context.Context, cfg aws.Config, name, apiURL string, o ...CreateOptions) (*Stack, error) {
	var opt CreateOptions
	if len(o) > 0 {
		opt = o[0]
	}
	tpl := opt.Template
	if tpl == nil {
		tpl = stratus.SAMTemplate
	}
	cf := cloudformation.NewFromConfig(cfg)
	net, err := createNetwork(ctx, cf, name+"-network")
	if err != nil {
		return nil, err
	}
	artifacts, err := uploadArtifacts(ctx, cfg, tpl, opt.Bootstraps)
	if err != nil {
		return nil, err
	}
	params := map[string]string{}
	required := map[string]bool{} // what the operator set: a parameter the template lacks is an error
	if opt.SAMConfig != nil {
		sc, err := SamconfigParameters(opt.SAMConfig)
		if err != nil {
			return nil, err
		}
		maps.Copy(params, sc)
		for k := range sc {
			required[k] = true
		}
	}
	maps.Copy(params, map[string]string{
		"ImageUri": DevImage, "VpcId": net["VpcId"],
		"WorkerSubnetIds": net["SubnetId"], "NetworkWorkerSubnetIds": net["NetworkSubnetId"],
		"ApiUrlOverride": apiURL, "RunnerPool": "off",
	})
	if opt.HeartbeatSeconds > 0 {
		params["HeartbeatSeconds"] = fmt.Sprint(opt.HeartbeatSeconds)
	}
	if opt.PoolPickupSeconds > 0 {
		params["RunnerPoolPickupSeconds"] = fmt.Sprint(opt.PoolPickupSeconds)
	}
	if opt.Pool {
		params["RunnerPool"] = "on"
	}
	maps.Copy(params, opt.Parameters)
	// The values a stand-in makes up anew each start (its VPC's ids, the
	// worker API's port) go to the translator as placeholders, put back in
	// its answer: the transform of an unchanged template is then cached
	// across starts. The translator treats a parameter value as an opaque
	// string, so the answer is the one the real values would give.
	tparams, placeholders := maps.Clone(params), map[string]string{}
	for _, k := range []string{"ApiUrlOverride", "VpcId", "WorkerSubnetIds", "NetworkWorkerSubnetIds"} {
		if _, given := opt.Parameters[k]; !given {
			ph := "https://stratus-dev-placeholder-" + strings.ToLower(k) + ".invalid"
			tparams[k], placeholders[ph] = ph, params[k]
		}
	}
	body, err := Transform(ctx, tpl, tparams, artifacts, cfg.Region)
	if err != nil {
		return nil, err
	}
	for ph, v := range placeholders {
		q, _ := json.Marshal(v)
		body = bytes.ReplaceAll(body, []byte(ph), q[1:len(q)-1])
	}
	// CloudFormation refuses a parameter the template does not declare,
	// and a value outside its constraints.
	var declared struct{ Parameters map[string]map[string]any }
	json.Unmarshal(body, &declared)
	checked := maps.Clone(params)
	var warnings []string
	for knob, set := range map[string]bool{"HeartbeatSeconds": opt.HeartbeatSeconds > 0, "RunnerPoolPickupSeconds": opt.PoolPickupSeconds > 0} {
		if !set {
			continue
		}
		// The stand-in's own knobs for tests may go outside the template's
		// constraints: deployed, with a warning; the rest is checked.
		delete(checked, knob)
		if err := checkParameters(declared.Parameters, map[string]string{knob: params[knob]}, nil); err != nil {
			warnings = append(warnings, err.Error()+": AWS would refuse this stack; the stand-in deploys it, for tests")
		}
	}
	slices.Sort(warnings)
	if err := checkParameters(declared.Parameters, checked, required); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrParameter, err)
	}
	var cfParams []cftypes.Parameter
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if _, ok := declared.Parameters[k]; ok {
			cfParams = append(cfParams, cftypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(params[k])})
		}
	}
	if err := createStack(ctx, cf, name, string(body), cfParams); err != nil {
		return nil, err
	}
	st, err := Load(ctx, cfg, name)
	if st != nil {
		st.Warnings = warnings
	}
	return st, err
}

// createStack creates a stack and checks it ended CREATE_COMPLETE (moto
// creates one synchronously). Errors: the failed resource's reason.
func createStack(ctx context.Context, cf *cloudformation.Client, name, body string, params []cftypes.Parameter) error {
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName: aws.String(name), TemplateBody: aws.String(body), Parameters: params,
		Capabilities: []cftypes.Capability{cftypes.CapabilityCapabilityIam, cftypes.CapabilityCapabilityNamedIam, cftypes.CapabilityCapabilityAutoExpand},
	}); err != nil {
		return fmt.Errorf("create the CloudFormation stack %s: %w", name, err)
	}
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe the stack %s: %w", name, err)
	}
	if len(out.Stacks) == 1 && out.Stacks[0].StackStatus == cftypes.StackStatusCreateComplete {
		return nil
	}
	reason := ""
	if ev, err := cf.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(name)}); err == nil {
		for _, e := range ev.StackEvents {
			if e.ResourceStatus == cftypes.ResourceStatusCreateFailed {
				reason = aws.ToString(e.ResourceStatusReason)
			}
		}
	}
	status := "unknown"
	if len(out.Stacks) == 1 {
		status = string(out.Stacks[0].StackStatus)
	}
	return fmt.Errorf("the stack %s is %s: %s", name, status, reason)
}

// networkTemplate is what an account gives a stack of template.yaml: a
// VPC with a subnet for the workers of each network profile.
const networkTemplate = `{
  "Resources": {
    "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.42.0.0/16", "EnableDnsSupport": true, "EnableDnsHostnames": true}},
    "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.42.1.0/24", "AvailabilityZone": {"Fn::Select": [0, {"Fn::GetAZs": ""}]}}},
    "NetworkSubnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.42.2.0/24", "AvailabilityZone": {"Fn::Select": [1, {"Fn::GetAZs": ""}]}}}
  },
  "Outputs": {
    "VpcId": {"Value": {"Ref": "Vpc"}},
    "SubnetId": {"Value": {"Ref": "Subnet"}},
    "NetworkSubnetId": {"Value": {"Ref": "NetworkSubnet"}}
  }
}`

// createNetwork creates the network stack and returns its outputs.
func createNetwork(ctx context.Context, cf *cloudformation.Client, name string) (map[string]string, error) {
	if err := createStack(ctx, cf, name, networkTemplate, nil); err != nil {
		return nil, err
	}
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		m[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return m, nil
}

// uploadArtifacts uploads what `sam package` would for template: each
// function's code (its bootstrap zipped, or a placeholder) and each state
// machine's definition (from stratus.SAMApp), under content-addressed keys
// in ArtifactsBucket; it returns logical id → object.
func uploadArtifacts(ctx context.Context, cfg aws.Config, template []byte, bootstraps map[string]string) (map[string]S3Location, error) {
	local, err := localArtifacts(ctx, template, cfg.Region)
	if err != nil {
		return nil, err
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(ArtifactsBucket)}); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		return nil, fmt.Errorf("create the bucket %s: %w", ArtifactsBucket, err)
	}
	out := map[string]S3Location{}
	for _, id := range slices.Sorted(maps.Keys(local)) {
		uri := local[id]
		var body []byte
		ext := ".zip"
		if strings.HasSuffix(uri, ".json") || strings.HasSuffix(uri, ".yaml") || strings.HasSuffix(uri, ".yml") {
			ext = path.Ext(uri)
			if body, err = fs.ReadFile(stratus.SAMApp, path.Clean(uri)); err != nil {
				return nil, fmt.Errorf("%s: DefinitionUri %s: %w", id, uri, err)
			}
		} else if body, err = bootstrapZip(bootstraps[id]); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		sum := sha256.Sum256(body)
		loc := S3Location{Bucket: ArtifactsBucket, Key: hex.EncodeToString(sum[:16]) + ext}
		if _, err := s3c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key), Body: bytes.NewReader(body)}); err != nil {
			return nil, fmt.Errorf("upload %s's artifact: %w", id, err)
		}
		out[id] = loc
	}
	return out, nil
}

// placeholderBootstrap is the code of a function no bootstrap was built for.
const placeholderBootstrap = "#!/bin/sh\necho 'stratus dev aws: no bootstrap was built for this function (make lambdas)' >&2\nexit 1\n"

// bootstrapZip returns a Lambda code zip: the file at p when it is a zip,
// else p as `bootstrap` (mode 0755); placeholderBootstrap when p is "".
func bootstrapZip(p string) ([]byte, error) {
	content := []byte(placeholderBootstrap)
	if p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read the bootstrap: %w", err)
		}
		if bytes.HasPrefix(b, []byte("PK\x03\x04")) {
			return b, nil
		}
		content = b
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return nil, err
	}
	w.Write(content)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Load reads the stack name on the stand-in cfg points at from its real
// outputs, parameters and resources. Errors: the stack is missing or not
// CREATE_COMPLETE; the first AWS call that fails.
func Load(ctx context.Context, cfg aws.Config, name string) (*Stack, error) {
	cf := cloudformation.NewFromConfig(cfg)
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("describe the stack %s: %w", name, err)
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("the stack %s: %d stacks answered", name, len(out.Stacks))
	}
	s := out.Stacks[0]
	if s.StackStatus != cftypes.StackStatusCreateComplete && s.StackStatus != cftypes.StackStatusUpdateComplete {
		return nil, fmt.Errorf("the stack %s is %s", name, s.StackStatus)
	}
	st := &Stack{Name: name, Outputs: map[string]string{}, Resources: map[string]string{}, Functions: map[string]string{}}
	for _, o := range s.Outputs {
		st.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	params := map[string]string{}
	for _, p := range s.Parameters {
		params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	var next *string
	for {
		r, err := cf.ListStackResources(ctx, &cloudformation.ListStackResourcesInput{StackName: aws.String(name), NextToken: next})
		if err != nil {
			return nil, fmt.Errorf("list the resources of the stack %s: %w", name, err)
		}
		for _, res := range r.StackResourceSummaries {
			id, phys := aws.ToString(res.LogicalResourceId), aws.ToString(res.PhysicalResourceId)
			st.Resources[id] = phys
			if aws.ToString(res.ResourceType) == "AWS::Lambda::Function" {
				st.Functions[id] = phys
			}
		}
		if next = r.NextToken; next == nil {
			break
		}
	}
	st.Table = st.Outputs[awsrun.OutputTable]
	st.Bucket = st.Outputs[awsrun.OutputBucket]
	st.APIURL = st.Outputs[awsrun.OutputAPIURL]
	st.QueueURL = st.Outputs[awsrun.OutputQueueURL]
	st.Role = st.Outputs[awsrun.OutputStateMachineRole]
	st.SecretARN = st.Outputs["HmacKeySecretArn"]
	st.Cluster = st.Outputs["RunnerClusterArn"]
	st.TaskDef = st.Outputs["RunnerTaskDefinitionArn"]
	st.NetworkTaskDef = st.Outputs["NetworkRunnerTaskDefinitionArn"]
	st.PublisherTaskDef = st.Outputs["PublisherTaskDefinitionArn"]
	st.StateMachine = st.Outputs["Implementation"+awsrun.StateMachineOutputSuffix]
	st.PoolQueueURL = st.Outputs["PoolQueueUrl"]
	st.PoolNetworkQueueURL = st.Outputs["NetworkPoolQueueUrl"]
	st.ClaimQueueURL = st.Outputs[awsrun.OutputClaimQueueURL]
	st.VPC = params["VpcId"]
	st.Subnets = listParam(params["WorkerSubnetIds"])
	if st.NetworkSubnets = listParam(params["NetworkWorkerSubnetIds"]); len(st.NetworkSubnets) == 0 {
		st.NetworkSubnets = st.Subnets
	}
	if sg := st.Resources["WorkerSecurityGroup"]; sg != "" {
		st.SecurityGroups = []string{sg}
	}
	if sg := st.Resources["NetworkWorkerSecurityGroup"]; sg != "" {
		st.NetworkSecurityGroups = []string{sg}
	}
	var missing []string
	for k, v := range map[string]string{awsrun.OutputTable: st.Table, awsrun.OutputBucket: st.Bucket, awsrun.OutputQueueURL: st.QueueURL,
		"HmacKeySecretArn": st.SecretARN, "RunnerClusterArn": st.Cluster, "RunnerTaskDefinitionArn": st.TaskDef} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, errors.New("the stack " + name + " has no output " + strings.Join(missing, ", ") + ": not a stack of template.yaml")
	}
	return st, nil
}

// listParam reads a List<…> or CommaDelimitedList parameter's value as
// DescribeStacks gives it: "a,b", or a list's printed form "['a', 'b']"
// (moto's).
func listParam(v string) []string {
	v = strings.Trim(strings.TrimSpace(v), "[]")
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.Trim(strings.TrimSpace(s), `'"`); s != "" {
			out = append(out, s)
		}
	}
	return out
}

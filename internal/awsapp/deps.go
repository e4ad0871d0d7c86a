package awsapp

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
	smsecret "github.com/stratusflow/stratus/internal/secret/secretsmanager"
)

func secretsmanagerSource(c smsecret.GetSecretValueAPI, id string) *smsecret.Source {
	return smsecret.New(c, id)
}

// ecsLauncher builds the ECS RunTask launcher of e: the Offline network
// (nodes without network access) from EnvSubnets and EnvSecurityGroups,
// the Online one from their EnvNetwork* counterparts; publish nodes run
// EnvPublisherTaskDefinition on the Online one.
func ecsLauncher(awsCfg aws.Config, e ECS) (launch.Launcher, error) {
	if err := require(EnvCluster, e.Cluster, EnvTaskDefinition, e.TaskDefinition,
		EnvSubnets, first(e.Subnets), EnvSecurityGroups, first(e.SecurityGroups)); err != nil {
		return nil, err
	}
	return ecs.New(awsecs.NewFromConfig(awsCfg), ecs.Config{
		Cluster:        e.Cluster,
		TaskDefinition: e.TaskDefinition,
		Container:      e.Container,
		Offline:        ecs.NetworkProfile{Subnets: e.Subnets, SecurityGroups: e.SecurityGroups, AssignPublicIP: e.AssignPublicIP},
		Online: ecs.NetworkProfile{Subnets: e.NetworkSubnets, SecurityGroups: e.NetworkSecurityGroups, AssignPublicIP: e.AssignPublicIP,
			TaskDefinition: e.NetworkTaskDefinition},
		PublisherTaskDefinition: e.PublisherTaskDefinition,
	})
}

func first(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}

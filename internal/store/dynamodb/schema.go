package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The key and index attribute names of the store's table. Every item has
// PartitionKey and SortKey (both strings); only handle items with an
// expiry have TTLAttribute and TTLBucketAttribute, which makes the
// HandlesByTTL index sparse.
const (
	PartitionKey       = "pk"
	SortKey            = "sk"
	TTLAttribute       = "ttl"        // epoch seconds (Number): DynamoDB TTL deletes the item some time after
	TTLBucketAttribute = "ttl_bucket" // "handle#NN" on every handle with an expiry: its partition of the index (TTLShards)
	HandlesByTTL       = "handles_by_ttl"
	TableBaseName      = "stratus" // the table is prefix + TableBaseName
)

// Attribute is a key attribute: its name and its scalar type (S or N).
type Attribute struct {
	Name string
	Type types.ScalarAttributeType
}

// Index is a global secondary index.
type Index struct {
	Name         string
	PartitionKey Attribute
	SortKey      Attribute
	Projection   types.ProjectionType
}

// Table describes one table of the store: what the SAM template declares
// (AWS::DynamoDB::Table with BillingMode PAY_PER_REQUEST, this key schema,
// these indexes and TimeToLiveSpecification on TTLAttribute) and what
// CreateTables creates on moto or LocalStack, so that both are the same
// table.
type Table struct {
	Name         string
	PartitionKey Attribute
	SortKey      Attribute
	Indexes      []Index
	TTLAttribute string
}

// Tables returns the tables of a store whose table names start with
// prefix: one table, prefix + TableBaseName. The package documentation
// describes the items it holds.
func Tables(prefix string) []Table {
	return []Table{{
		Name:         prefix + TableBaseName,
		PartitionKey: Attribute{PartitionKey, types.ScalarAttributeTypeS},
		SortKey:      Attribute{SortKey, types.ScalarAttributeTypeS},
		Indexes: []Index{{
			Name:         HandlesByTTL,
			PartitionKey: Attribute{TTLBucketAttribute, types.ScalarAttributeTypeS},
			SortKey:      Attribute{TTLAttribute, types.ScalarAttributeTypeN},
			Projection:   types.ProjectionTypeKeysOnly,
		}},
		TTLAttribute: TTLAttribute,
	}}
}

// TableName is the name of the store's table for prefix.
func TableName(prefix string) string { return Tables(prefix)[0].Name }

// CreateTableInput is the CreateTable request for t (on-demand billing).
func (t Table) CreateTableInput() *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{TableName: aws.String(t.Name), BillingMode: types.BillingModePayPerRequest}
	defined := map[string]bool{}
	key := func(a Attribute, kt types.KeyType) types.KeySchemaElement {
		if !defined[a.Name] {
			defined[a.Name] = true
			in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(a.Name), AttributeType: a.Type})
		}
		return types.KeySchemaElement{AttributeName: aws.String(a.Name), KeyType: kt}
	}
	in.KeySchema = []types.KeySchemaElement{key(t.PartitionKey, types.KeyTypeHash), key(t.SortKey, types.KeyTypeRange)}
	for _, ix := range t.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  []types.KeySchemaElement{key(ix.PartitionKey, types.KeyTypeHash), key(ix.SortKey, types.KeyTypeRange)},
			Projection: &types.Projection{ProjectionType: ix.Projection},
		})
	}
	return in
}

// TableAdmin is what CreateTables needs of a DynamoDB client.
type TableAdmin interface {
	dynamodb.DescribeTableAPIClient
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTables creates the store's tables for prefix (Tables) unless they
// exist, waits until they are active and turns TTL on where it is off, so
// running it twice is harmless. It is for tests and for `stratus` against
// moto or LocalStack; on AWS the SAM template declares the same tables.
func CreateTables(ctx context.Context, c TableAdmin, prefix string) error {
	for _, t := range Tables(prefix) {
		_, err := c.CreateTable(ctx, t.CreateTableInput())
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create DynamoDB table %q: %w", t.Name, err)
		}
		if err := dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)}, 2*time.Minute); err != nil {
			return fmt.Errorf("wait for DynamoDB table %q: %w", t.Name, err)
		}
		ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(t.Name)})
		if err != nil {
			return fmt.Errorf("describe TTL of DynamoDB table %q: %w", t.Name, err)
		}
		if d := ttl.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			continue
		}
		_, err = c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(t.Name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(t.TTLAttribute), Enabled: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("turn on TTL (%s) of DynamoDB table %q: %w", t.TTLAttribute, t.Name, err)
		}
	}
	return nil
}

package lambdas

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AuthIAM is a route's authorization type when its event names API
// Gateway's IAM authorizer (Auth.Authorizer: AWS_IAM).
const AuthIAM = "AWS_IAM"

// IAMService is the SigV4 signing name of an API Gateway API's routes.
const IAMService = "execute-api"

// MaxSignatureSkew is how far a signed request's X-Amz-Date may be from
// now: "a request must reach AWS within five minutes of the time stamp in
// the request" (IAM User Guide § Elements of an AWS API request signature).
const MaxSignatureSkew = 5 * time.Minute

// IAMPrincipal is an AWS identity whose secret the front knows, and what
// API Gateway's IAM authorizer puts in requestContext.authorizer.iam for a
// request it signed: the IAM user or role session the access key belongs
// to.
type IAMPrincipal struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string // required as X-Amz-Security-Token when set
	AccountID       string
	UserARN         string // arn:aws:iam::<account>:user/<name>, …:assumed-role/…
	UserID          string // AIDA… of a user, AROA…:<session> of a role session
	PrincipalOrgID  string
}

// IAM is what the front's AWS_IAM routes verify requests against: the
// API's region and the principals it knows. It does not evaluate IAM
// policies: any known principal may invoke an AWS_IAM route (on AWS the
// caller also needs execute-api:Invoke on the route, which the template's
// tests check in the policy that grants it).
type IAM struct {
	Region     string
	Principals []IAMPrincipal
	Now        func() time.Time // nil: time.Now
}

// FrontOption configures APIFront.
type FrontOption func(*apiFront)

// WithIAM makes the front verify the SigV4 signature of every request to
// an AWS_IAM route against iam, as API Gateway's IAM authorizer does
// (authorizeIAM). Without it such a route refuses every request.
func WithIAM(iam IAM) FrontOption {
	return func(a *apiFront) { a.iam = &iam }
}

// iamRefusal is API Gateway's answer to a request its IAM authorizer
// refuses: 403, its x-amzn-ErrorType (none for an unsigned request) and
// message.
type iamRefusal struct {
	errorType, message string
}

// The messages API Gateway answers, as its troubleshooting guide quotes
// them (API Gateway: How do I troubleshoot signature mismatch errors;
// an unsigned request to an HTTP API's IAM route is a bare "Forbidden").
var (
	refuseUnsigned   = &iamRefusal{"", "Forbidden"}
	refuseIncomplete = &iamRefusal{"IncompleteSignatureException",
		"Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."}
	refuseUnknownKey = &iamRefusal{"UnrecognizedClientException", "The security token included in the request is invalid."}
	refuseSignature  = &iamRefusal{"InvalidSignatureException",
		"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}
)

// authorizeIAM verifies r's SigV4 Authorization header as API Gateway's
// IAM authorizer does — algorithm AWS4-HMAC-SHA256, a credential of a
// known access key scoped to the API's region and execute-api on the day
// of its X-Amz-Date, that date within MaxSignatureSkew of now, the
// principal's session token if it has one, and the signature recomputed
// from the method, path, query, the headers it names and body's SHA-256 —
// and returns what the authorizer fills in requestContext.authorizer.iam.
// Query-string (presigned) signatures are not taken.
func (a *apiFront) authorizeIAM(r *http.Request, body []byte) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, *iamRefusal) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	if auth == "" {
		return nil, refuseUnsigned
	}
	if a.iam == nil {
		return nil, refuseUnknownKey
	}
	alg, rest, _ := strings.Cut(auth, " ")
	params := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		params[k] = v
	}
	cred, signed, sig := params["Credential"], params["SignedHeaders"], params["Signature"]
	scope := strings.Split(cred, "/")
	amzDate := r.Header.Get("X-Amz-Date")
	if alg != "AWS4-HMAC-SHA256" || cred == "" || signed == "" || sig == "" || len(scope) != 5 || amzDate == "" {
		return nil, refuseIncomplete
	}
	var p *IAMPrincipal
	for i := range a.iam.Principals {
		if a.iam.Principals[i].AccessKeyID == scope[0] {
			p = &a.iam.Principals[i]
		}
	}
	if p == nil || r.Header.Get("X-Amz-Security-Token") != p.SessionToken {
		return nil, refuseUnknownKey
	}
	now := time.Now
	if a.iam.Now != nil {
		now = a.iam.Now
	}
	at, err := time.Parse("20060102T150405Z", amzDate)
	switch {
	case scope[3] != IAMService:
		return nil, &iamRefusal{"InvalidSignatureException", "Credential should be scoped to correct service: '" + IAMService + "'. "}
	case scope[2] != a.iam.Region:
		return nil, &iamRefusal{"InvalidSignatureException", "Credential should be scoped to a valid region. "}
	case scope[4] != "aws4_request" || err != nil || scope[1] != at.Format("20060102"):
		return nil, refuseSignature
	case now().Sub(at) > MaxSignatureSkew || at.Sub(now()) > MaxSignatureSkew:
		return nil, &iamRefusal{"InvalidSignatureException", "Signature expired: " + amzDate + " is now earlier or later than the time allowed (5 min. either way)"}
	}
	// The request as the client signed it: the headers it names, the
	// path and query as they arrived, the body's hash; the SDK's signer
	// computes the same canonical request and signature from them.
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, refuseSignature
	}
	again.Host = r.Host
	names := strings.Split(signed, ";")
	if !slices.Contains(names, "host") {
		return nil, refuseSignature
	}
	for _, h := range names {
		switch h {
		case "host", "x-amz-date", "x-amz-security-token": // the signer writes them
		case "content-length": // Go's server keeps it out of r.Header
			again.ContentLength = int64(len(body))
		default:
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: p.AccessKeyID, SecretAccessKey: p.SecretAccessKey, SessionToken: p.SessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), IAMService, a.iam.Region, at); err != nil {
		return nil, refuseSignature
	}
	want := again.Header.Get("Authorization")
	if !strings.Contains(want, "SignedHeaders="+signed+",") || !hmac.Equal([]byte(want[strings.LastIndex(want, "Signature=")+len("Signature="):]), []byte(sig)) {
		return nil, refuseSignature
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccessKey: p.AccessKeyID, AccountID: p.AccountID, CallerID: p.UserID,
		PrincipalOrgID: p.PrincipalOrgID, UserARN: p.UserARN, UserID: p.UserID}, nil
}

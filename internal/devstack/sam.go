package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

//go:embed sam_transform.py
var samTransformPy []byte

// ErrTransform is the error (wrapped, with the translator's message, which
// names the resource) of a template the SAM translator refuses.
var ErrTransform = errors.New("the SAM template does not transform")

// MissingTranslator says why the SAM translator cannot run on this machine
// ("" when python3 imports samtranslator): what to install.
func MissingTranslator() string {
	if _, err := exec.LookPath("python3"); err != nil {
		return "python3 is not on PATH (stratus dev aws transforms template.yaml with the SAM translator: pip install aws-sam-translator, or use the python of a SAM CLI install)"
	}
	out, err := exec.Command("python3", "-c", "import samtranslator.translator.transform, yaml").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Sprintf("python3 cannot import the SAM translator (%s); pip install aws-sam-translator (SAM CLI ships it)", msg)
	}
	return ""
}

// S3Location is an object in S3, as `sam package` leaves a CodeUri or a
// DefinitionUri.
type S3Location struct {
	Bucket string `json:"Bucket"`
	Key    string `json:"Key"`
}

// samRequest is what sam_transform.py reads on stdin.
type samRequest struct {
	Template   string                `json:"template"`
	Parameters map[string]string     `json:"parameters,omitempty"`
	Region     string                `json:"region"`
	Artifacts  map[string]S3Location `json:"artifacts,omitempty"`
	Inspect    bool                  `json:"inspect,omitempty"`
}

// runSAM runs sam_transform.py on req and returns its output, from the
// cache when an earlier run had the same inputs: an answer is kept under
// the user cache directory (stratus/sam-transform/), keyed by a hash of the
// script and req, so a stand-in started again with the same template does
// not run the translator. Errors: ErrTransform with the script's message;
// MissingTranslator's words.
func runSAM(ctx context.Context, req samRequest) ([]byte, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(samTransformPy)
	h.Write(in)
	cached := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cached = filepath.Join(dir, "stratus", "sam-transform", hex.EncodeToString(h.Sum(nil))+".json")
		if b, err := os.ReadFile(cached); err == nil && json.Valid(b) {
			return b, nil
		}
	}
	if why := MissingTranslator(); why != "" {
		return nil, errors.New(why)
	}
	cmd := exec.CommandContext(ctx, "python3", "-c", string(samTransformPy))
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION="+req.Region)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			return nil, fmt.Errorf("%w: %s", ErrTransform, msg)
		}
		return nil, fmt.Errorf("run the SAM translator (python3): %v: %s", err, msg)
	}
	out := stdout.Bytes()
	if !json.Valid(out) {
		return nil, fmt.Errorf("the SAM translator printed no JSON: %.200s", out)
	}
	if cached != "" && os.MkdirAll(filepath.Dir(cached), 0o755) == nil {
		// Written whole, then renamed: a concurrent start never reads half.
		tmp := fmt.Sprintf("%s.%d.tmp", cached, os.Getpid())
		if os.WriteFile(tmp, out, 0o644) == nil {
			os.Rename(tmp, cached)
		}
	}
	return out, nil
}

// localArtifacts returns the functions and state machines of template
// whose CodeUri or DefinitionUri is a local path (what `sam package`
// uploads): logical id → path.
func localArtifacts(ctx context.Context, template []byte, region string) (map[string]string, error) {
	out, err := runSAM(ctx, samRequest{Template: string(template), Region: region, Inspect: true})
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("read the SAM translator's answer: %w", err)
	}
	return m, nil
}

// Transform transforms the SAM template as `sam deploy` does, with the
// parameter values given and each CodeUri/DefinitionUri of artifacts
// (logical id → object) pointed at its S3 object, and returns the
// CloudFormation template (JSON). Answers are cached (runSAM). Errors:
// ErrTransform wrapping the translator's message (it names the resource);
// python3 or samtranslator missing (MissingTranslator's words).
func Transform(ctx context.Context, template []byte, params map[string]string, artifacts map[string]S3Location, region string) ([]byte, error) {
	return runSAM(ctx, samRequest{Template: string(template), Parameters: params, Region: region, Artifacts: artifacts})
}

// SamconfigParameters returns the parameter overrides samconfig.toml
// gives `sam deploy` ([default.deploy.parameters] parameter_overrides:
// "Key=Value Key2=Value2", optionally quoted, or a list of such strings).
// Errors: the file is not TOML.
func SamconfigParameters(data []byte) (map[string]string, error) {
	var doc struct {
		Default struct {
			Deploy struct {
				Parameters struct {
					Overrides any `toml:"parameter_overrides"`
				} `toml:"parameters"`
			} `toml:"deploy"`
		} `toml:"default"`
	}
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, fmt.Errorf("samconfig.toml: %w", err)
	}
	var items []string
	switch v := doc.Default.Deploy.Parameters.Overrides.(type) {
	case string:
		items = splitOverrides(v)
	case []any:
		for _, s := range v {
			if str, ok := s.(string); ok {
				items = append(items, splitOverrides(str)...)
			}
		}
	}
	out := map[string]string{}
	for _, it := range items {
		k, val, ok := strings.Cut(it, "=")
		if !ok {
			continue
		}
		out[k] = strings.Trim(val, `"'`)
	}
	return out, nil
}

// splitOverrides splits "A=1 B=\"x y\"" at spaces outside quotes.
func splitOverrides(s string) []string {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == 0 && r == ' ':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

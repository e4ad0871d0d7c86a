package stratus

import (
	"embed"
	_ "embed"
)

// SAMTemplate is template.yaml, the SAM template `sam deploy` ships and
// `stratus dev aws` deploys on its stand-in (README "What dev aws emulates").
//
//go:embed template.yaml
var SAMTemplate []byte

// SAMApp holds what SAMTemplate refers to by path and a deploy needs
// besides the functions' code: the state machine definitions of its
// DefinitionUri properties (statemachine/*.asl.json).
//
//go:embed template.yaml statemachine/*.asl.json
var SAMApp embed.FS

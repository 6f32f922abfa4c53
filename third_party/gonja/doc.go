// Package gonja implements a Jinja2-like template engine for Go.
package gonja

import (
	_ "github.com/nikolalohinski/gonja/v2/docs"
)

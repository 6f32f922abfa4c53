package controlStructures

import "github.com/nikolalohinski/gonja/v2/nodes"

// PaV: every control structure shows its children to a nodes.Walker, in
// field order, so that a program can check or rewrite a whole parsed
// template; and the parts programs need to read have accessors.

func (acs *AutoescapeControlStructure) WalkChildren(w *nodes.Walker) { w.Walk(acs.Wrapper) }

func (c *CallControlStructure) WalkChildren(w *nodes.Walker) {
	w.Walk(c.Call)
	w.Walk(c.Caller)
}

func (c *DoControlStructure) WalkChildren(w *nodes.Walker) { w.Expression(&c.Expression) }

func (fcs *FilterControlStructure) WalkChildren(w *nodes.Walker) {
	w.Walk(fcs.bodyWrapper)
	for _, f := range fcs.filterChain {
		w.Walk(f)
	}
}

func (fcs *ForControlStructure) WalkChildren(w *nodes.Walker) {
	w.Expression(&fcs.ObjectEvaluator)
	w.Expression(&fcs.IfCondition)
	w.Walk(fcs.BodyWrapper)
	w.Walk(fcs.EmptyWrapper)
}

func (ics *IfControlStructure) WalkChildren(w *nodes.Walker) {
	w.Expressions(ics.Conditions)
	for _, wr := range ics.Wrappers {
		w.Walk(wr)
	}
}

func (ics *ImportControlStructure) WalkChildren(w *nodes.Walker) {
	w.Expression(&ics.filenameExpression)
}

func (fcs *FromImportControlStructure) WalkChildren(w *nodes.Walker) {
	w.Expression(&fcs.FilenameExpression)
	w.Walk(fcs.Template)
	for _, m := range fcs.Macros {
		w.Walk(m)
	}
}

func (ics *IncludeControlStructure) WalkChildren(w *nodes.Walker) {
	w.Expression(&ics.filenameExpression)
}

func (mcs *MacroControlStructure) WalkChildren(w *nodes.Walker) { w.Walk(mcs.Macro) }

func (rcs *RawControlStructure) WalkChildren(w *nodes.Walker) { w.Walk(rcs.data) }

func (scs *SetControlStructure) WalkChildren(w *nodes.Walker) {
	w.Expression(&scs.target)
	for _, n := range scs.more {
		w.Walk(n)
	}
	w.Expression(&scs.expression)
	w.Walk(scs.body)
	for _, f := range scs.filters {
		w.Walk(f)
	}
}

// Targets are what the set statement assigns to: one expression, or the
// names a tuple is unpacked into.
func (scs *SetControlStructure) Targets() []nodes.Expression {
	out := []nodes.Expression{scs.target}
	for _, n := range scs.more {
		out = append(out, n)
	}
	return out
}

func (c *TransControlStructure) WalkChildren(w *nodes.Walker) {
	w.ExpressionMap(c.Variables)
	w.Walk(c.SingularBody)
	w.Walk(c.PluralBody)
}

func (wcs *WithControlStructure) WalkChildren(w *nodes.Walker) {
	w.ExpressionMap(wcs.pairs)
	w.Walk(wcs.wrapper)
}

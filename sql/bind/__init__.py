"""Binding: sqlglot ASTs -> typed, name-resolved forms. :mod:`sql.bind.expr` binds scalar
expressions to :mod:`stream.expr` trees; :mod:`sql.bind.select` binds queries to logical plans
(:mod:`sql.plan.nodes`). Statements (DDL/DML) are bound by :mod:`sql.statements`."""

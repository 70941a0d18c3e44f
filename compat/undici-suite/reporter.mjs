import util from 'node:util'
// node:test reporter: one JSON line per finished test (in report order) with its nesting, so
// run.mjs can rebuild full name paths ("suite > test > subtest"). Errors are summarised.
const MAX = 2000

function describeError (err) {
  if (err == null) return undefined
  const parts = []
  const failureType = err.failureType
  const cause = err.cause ?? err
  if (failureType && failureType !== 'testCodeFailure') parts.push(`[${failureType}]`)
  const seen = new Set()
  let e = cause
  let depth = 0
  while (e && typeof e === 'object' && !seen.has(e) && depth < 4) {
    seen.add(e)
    const name = e.name ?? e.constructor?.name ?? 'Error'
    const code = e.code ? ` (${e.code})` : ''
    let message = String(e.message ?? '').trim()
    // Errors that could not be serialized from the test process arrive with only a stack.
    if (!message && typeof e.stack === 'string') message = e.stack.split('\n').filter((l) => !/^\s+at /.test(l)).join('\n').trim()
    parts.push(`${depth ? 'caused by ' : ''}${message.startsWith(name) ? '' : `${name}${code}: `}${message}`)
    if (e.operator && 'actual' in e) {
      try {
        parts.push(`actual=${short(e.actual)} expected=${short(e.expected)} operator=${e.operator}`)
      } catch { /* leave actual/expected out */ }
    }
    e = e.cause
    depth++
  }
  if (typeof cause !== 'object' || cause === null) parts.push(String(cause))
  else if (typeof cause.message !== 'string' && typeof cause.stack !== 'string') {
    // Not serializable from the test process: only its inspection survived.
    const lines = util.inspect(cause, { depth: 2, breakLength: Infinity }).split('\n')
    const firstAt = lines.findIndex((l) => /^\s+at /.test(l))
    const head = firstAt === -1 ? lines : lines.slice(0, firstAt)
    const at = lines.filter((l) => /^\s+at /.test(l)).slice(0, 6).map((l) => l.trim())
    const tail = firstAt === -1 ? [] : lines.slice(firstAt).filter((l) => !/^\s+at /.test(l))
    parts.length = 0
    if (failureType && failureType !== 'testCodeFailure') parts.push(`[${failureType}]`)
    parts.push([...head, ...tail].join(' ').replace(/\s+/g, ' ').trim())
    if (at.length) parts.push(`;; ${at.join(' | ')}`)
    const text = parts.join(' ; ')
    return text.length > MAX ? text.slice(0, MAX) + '…' : text
  }
  const stack = typeof cause?.stack === 'string'
    ? cause.stack.split('\n').filter((l) => /^\s+at /.test(l)).slice(0, 6).map((l) => l.trim()).join(' | ')
    : ''
  let text = parts.join(' ; ')
  if (stack) text += ` ;; ${stack}`
  return text.length > MAX ? text.slice(0, MAX) + '…' : text
}

function short (v) {
  let s
  try { s = typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v) ?? String(v) } catch { s = String(v) }
  if (s === undefined) s = String(v)
  return s.length > 300 ? s.slice(0, 300) + '…' : s
}

export default async function * lifelineReporter (source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const d = event.data
    let status
    if (d.todo !== undefined && d.todo !== false) status = 'todo'
    else if (d.skip !== undefined && d.skip !== false) status = 'skip'
    else status = event.type === 'test:pass' ? 'pass' : 'fail'
    const rec = {
      name: d.name,
      nesting: d.nesting,
      status,
      kind: d.details?.type,
      ms: d.details?.duration_ms,
      file: d.file
    }
    if (event.type === 'test:fail') rec.error = describeError(d.details?.error)
    yield JSON.stringify(rec) + '\n'
  }
}

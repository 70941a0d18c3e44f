import path from 'node:path'
import { pathToFileURL } from 'node:url'
const dist = process.env.LIFELINE_DIST || path.join(import.meta.dirname, '../../../dist') // <repo>/dist
const { withTimeout } = await import(path.join(dist, 'index.js'))
await withTimeout(120000, () => import(pathToFileURL(process.env.WRAP_TARGET).href))

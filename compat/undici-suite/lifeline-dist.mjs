// Where the lifeline build under test lives: $LIFELINE_DIST, default <repo>/dist.
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
export const dist = path.resolve(process.env.LIFELINE_DIST || path.join(REPO, 'dist'))
export const importDist = (rel) => import(pathToFileURL(path.join(dist, rel)).href)

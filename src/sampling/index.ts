export { EvidenceSampler } from './evidence-sampler.js';
export { EvidenceSpanProcessor, type EvidenceSpanProcessorOptions } from './evidence-span-processor.js';
export { isEvidence, isEvidenceAtStart } from './evidence.js';
export { samplerFromEnv } from './sampler-from-env.js';

export { Installs, installed, type Installed } from './installed.js';

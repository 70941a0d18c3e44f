export { SETTINGS, settingFromEnv, settingOption, type NumberSetting } from './settings.js';
